"""The drafters specviz knows, and the config that names one.

Adding a drafter: a module beside this one with its Drafter subclass and a `SPEC`
(core.drafters.base.DrafterSpec), and one entry in `SPECS` below. Everything that offers or
checks a drafter (the command line, the Drafting box, the wire format, the trace header's
reading) asks this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specviz.core.drafters import (
    draft_model,
    eagle3,
    early_exit,
    prompt_lookup,
    string_bridge,
    suffix,
    tli,
)
from specviz.core.drafters.base import Drafter, DrafterParam, DrafterSpec

SPECS: dict[str, DrafterSpec] = {
    spec.kind: spec
    for spec in (
        draft_model.SPEC,
        prompt_lookup.SPEC,
        early_exit.SPEC,
        suffix.SPEC,
        eagle3.SPEC,
        tli.SPEC,
        string_bridge.SPEC,
    )  # fmt: skip
}


def spec(kind: str) -> DrafterSpec:
    """The spec of a drafter kind; ValueError naming the known ones."""
    try:
        return SPECS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"unknown drafter {kind!r} (one of {', '.join(SPECS)})") from None


def all_params() -> tuple[DrafterParam, ...]:
    """Every drafter's parameters, each name once, in registry order (the flags, the box)."""
    seen: dict[str, DrafterParam] = {}
    for s in SPECS.values():
        for p in s.params:
            seen.setdefault(p.name, p)
    return tuple(seen.values())


@dataclass(frozen=True, init=False)
class DrafterConfig:
    """Which drafter, and the parameters given for it (a parameter left out takes its
    spec's default). A plain value: equal and hashable by content, safe across threads."""

    kind: str
    params: tuple[tuple[str, Any], ...]  # (name, value), sorted by name; None values dropped

    def __init__(self, kind: str = "model", **params: Any):
        object.__setattr__(self, "kind", kind)
        given = tuple(sorted((k, v) for k, v in params.items() if v is not None))
        object.__setattr__(self, "params", given)

    @property
    def spec(self) -> DrafterSpec:
        return spec(self.kind)

    @property
    def needs_draft_model(self) -> bool:
        return self.spec.needs_draft_model

    def values(self) -> dict[str, Any]:
        """Every parameter of this drafter, given or default."""
        given = dict(self.params)
        return {p.name: given.get(p.name, p.default) for p in self.spec.params}

    def param(self, name: str) -> Any:
        """One parameter's value, given or default; KeyError if this drafter has none so."""
        return self.values()[name]

    def validate(self) -> None:
        """ValueError for an unknown kind, a parameter it does not take or a bad value."""
        s = self.spec
        known = {p.name for p in s.params}
        extra = sorted(set(dict(self.params)) - known)
        if extra:
            raise ValueError(f"the {s.kind} drafter takes no {', '.join(extra)}")
        for p in s.params:
            p.check(self.values()[p.name])

    def to_json(self) -> dict[str, Any]:
        """The wire format's (and a Drafting box's) form: kind and every parameter."""
        return {"kind": self.kind, **self.values()}

    @classmethod
    def from_json(cls, obj: Any, lenient: bool = False) -> DrafterConfig:
        """From {"kind": ..., parameters...}: ValueError for anything else. lenient (a trace
        header being shown): unknown keys and bad values fall back to the defaults."""
        if type(obj) is not dict:
            raise ValueError("a drafter must be an object with a kind")
        kind = obj.get("kind", "model")
        if lenient and kind not in SPECS:
            return cls()
        s = spec(kind)
        names = {p.name for p in all_params()}
        if not lenient and not set(obj) - {"kind"} <= names:
            bad = sorted(set(obj) - {"kind"} - names)
            raise ValueError(f"unknown drafter fields: {', '.join(bad)}")
        params = {}
        for p in s.params:
            value = obj.get(p.name, p.default)
            try:
                p.check(value)
            except ValueError:
                if not lenient:
                    raise
                value = p.default
            params[p.name] = value
        return cls(kind, **params)


def make_drafter(config: DrafterConfig, pair) -> Drafter:
    """The drafter `config` names, on a loaded pair (core.models.pair.ModelPair); ValueError
    if it cannot be built (no draft model for "model", an unsupported layout for
    "early-exit")."""
    config.validate()
    return config.spec.build(config.values(), pair)


def check_tree_kind(kind: str) -> None:
    """ValueError unless drafters of this kind draft token trees (DrafterSpec.drafts_trees):
    what the engine, the command line and the Drafting box refuse a tree with."""
    if not spec(kind).drafts_trees:
        trees = ", ".join(s.kind for s in SPECS.values() if s.drafts_trees)
        raise ValueError(
            f"a token tree is drafted by the {trees} drafters; the {kind} drafter drafts "
            "chains only (use one of those, or --tree-width 1)"
        )
