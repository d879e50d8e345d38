"""What the registry knows of a drafter without loading one: its parameters (DrafterParam)
and its spec (DrafterSpec), whose build imports the drafter's module, and torch with it, only
when a drafter is made. The command line's parser, `specviz inspect` and a trace header's
reading ask the specs and so start without torch (issue 48: `specviz --help` took 4-8 s).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specviz.core.drafters.base import Drafter

TEXT_MAX = 4096  # characters of a text parameter (a folder or a hub id)


@dataclass(frozen=True)
class DrafterParam:
    """One parameter a drafter takes: an integer in [low, high], a number where `decimals`
    > 0, or (text=True) a folder or hub id of at most TEXT_MAX characters. Its name is the
    key in the config, the trace header and the wire format; the flag (--ngram-max) and the
    Drafting box's row derive from it."""

    name: str  # "ngram_max"
    label: str  # the Drafting box's row: "N-gram max"
    help: str  # the flag's help and the row's tooltip
    default: int | float | str | None
    low: int = 0
    high: int = 0
    none_label: str | None = None  # a parameter that may be None says what None means
    decimals: int = 0  # > 0: a real number (the flag's type, the box's step), shown so
    text: bool = False  # a string (--head DIR), not a number

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def metavar(self) -> str:
        return "DIR|HF_ID" if self.text else "X" if self.decimals else "N"

    def check(self, value: Any) -> None:
        """ValueError unless value is an int (a number, with decimals) in [low, high] (a
        text parameter: a non-empty string without control characters), or None where None
        is allowed."""
        if value is None and self.none_label is not None:
            return
        if self.text:
            if (type(value) is not str or not value.strip() or len(value) > TEXT_MAX
                    or any(ord(c) < 32 for c in value)):  # fmt: skip
                raise ValueError(
                    f"the {self.label.lower()} must be a folder or a hub id (at most "
                    f"{TEXT_MAX} characters, no control characters), got {value!r:.80}"
                )
            return
        types = (int, float) if self.decimals else (int,)
        if type(value) not in types or not self.low <= value <= self.high:
            what = "a number" if self.decimals else "an integer"
            raise ValueError(
                f"the {self.label.lower()} must be {what} between {self.low} and "
                f"{self.high}, got {value!r}"
            )


@dataclass(frozen=True)
class DrafterSpec:
    """A drafter as the rest of specviz sees it: one entry in core.drafters.registry."""

    kind: str  # the --drafter name and the trace header's drafter.kind
    label: str  # the Drafting box's choice
    tip: str  # its tooltip
    help: str  # the --drafter help fragment
    needs_draft_model: bool  # False: only the target is loaded
    params: tuple[DrafterParam, ...]
    # (parameter values, ModelPair) -> the drafter; built_by(module) for specviz's own
    build: Callable[[Mapping[str, Any], Any], Drafter]
    words: Callable[[Mapping[str, Any]], str]  # what drafts, in words (Models box, status)
    # Its Drafter has propose_tree, for tree_width > 1: said here only; the engine,
    # the command line and the Drafting box read it (registry.check_tree_kind)
    drafts_trees: bool = False
    # Why a round of this drafter drafted nothing short of a length limit (its stop reason
    # "no_match"), in words; None: it drafts at every round the limits leave room for
    no_match: str | None = None


def built_by(module: str) -> Callable[[Mapping[str, Any], Any], Drafter]:
    """A spec's build: `module`'s build(params, pair), the module imported at the call."""

    def build(params: Mapping[str, Any], pair: Any) -> Drafter:
        return importlib.import_module(module).build(params, pair)

    build.__qualname__ = f"built_by({module!r})"
    return build
