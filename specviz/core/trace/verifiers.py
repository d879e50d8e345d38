"""The verification rules specviz knows: one `VerifierSpec` each, a table without torch.

Adding a rule: a module with its Verifier (core.decoding.verifier's protocol) and one entry
in `SPECS` below. Everything that offers or checks a rule by name (the command line's
--verifier, the window's Verifier combo, a trace's settings.verifier, tune's sweeps, the
engine's verifier_for) asks this module; the Verifier itself is imported on first use
(`VerifierSpec.build`), so reading the table costs no torch. A trace names the rule its
rounds ran under (schema 1.3); "token" in a tree's settings is read as "tree" (Settings).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# What the run, inspect and the window's banner say about a lossy verifier.
LOSSY_WARNING = (
    "the {rule} rule is LOSSY: it does not reproduce the target's distribution (the output "
    "is not what the target alone would sample)"
)


@dataclass(frozen=True)
class VerifierSpec:
    """A verification rule as the rest of specviz sees it."""

    name: str  # the --verifier name, the trace's settings.verifier
    lossless: bool  # the emitted tokens follow the target's p exactly
    description: str  # one line: the --verifier help and the combo's tooltip
    # The Verifier: "module:Class", imported on first use (it needs torch), or a callable.
    factory: str | Callable[[], Any]
    label: str = ""  # the window's combo text; empty: the name
    trees: bool = False  # judges token trees (tree_width > 1) rather than chains
    one_hot_q: bool = False  # exact only for a drafter whose q is one-hot (a lookup)
    # The Settings fields the rule reads: in a trace only under this rule (typical_epsilon).
    options: tuple[str, ...] = ()
    # A judged token's status is its u against its own min(1, p/q); False: the rule's own
    # numbers in the round decide (block, typical), checked by their extras (core.trace.extras).
    token_fates: bool = True

    @property
    def text(self) -> str:
        return self.label or self.name

    def build(self):
        """A new Verifier for this rule (imports its module, and so torch)."""
        if callable(self.factory):
            return self.factory()
        module, _, cls = self.factory.partition(":")
        return getattr(importlib.import_module(module), cls)()


SPECS: dict[str, VerifierSpec] = {
    s.name: s
    for s in (
        VerifierSpec(
            "token",
            True,
            "one draft at a time, kept with min(1, p/q) (Leviathan et al.)",
            "specviz.core.decoding.verifier:TokenVerifier",
            label="token-wise",
        ),  # fmt: skip
        VerifierSpec(
            "block",
            True,
            "the drafts as a block (Sun et al. 2024): keeps at least as many in expectation",
            "specviz.core.decoding.block:BlockVerifier",
            token_fates=False,
        ),  # fmt: skip
        VerifierSpec(
            "typical",
            False,
            "Medusa's typical acceptance: keeps x while p(x) > "
            "min(epsilon, delta exp(-H(p))); LOSSY, the output no longer follows "
            "the target",
            "specviz.core.decoding.typical:TypicalVerifier",
            label="typical (LOSSY)",
            options=("typical_epsilon", "typical_delta"),
            token_fates=False,
        ),  # fmt: skip
        VerifierSpec(
            "lenient",
            False,
            "Leviathan et al.'s lenience, l = 0.5: keeps x with min(1, p/(l q)); LOSSY, "
            "the output no longer follows the target",
            "specviz.core.decoding.lenient:LenientVerifier",
            label="lenient (LOSSY)",
            token_fates=False,
        ),  # fmt: skip
        VerifierSpec(
            "tree",
            True,
            "a token tree, one node's children at a time: SpecInfer's "
            "multi-draft rule (sampled children) or the EAGLE walk (q's top W)",
            "specviz.core.tree.verifier:TreeVerifier",
            label="tree (multi-draft)",
            trees=True,
        ),  # fmt: skip
    )
}


def spec(name: str) -> VerifierSpec:
    """The spec of a rule; ValueError naming the known ones."""
    try:
        return SPECS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown verifier {name!r} (one of {', '.join(SPECS)})") from None


def names(trees: bool | None = None, lossless: bool | None = None) -> tuple[str, ...]:
    """The rules' names in registry order: all, or those judging trees (chains) / lossless
    (lossy) ones only."""
    return tuple(
        s.name
        for s in SPECS.values()
        if (trees is None or s.trees == trees) and (lossless is None or s.lossless == lossless)
    )


def token_fates(name: str) -> bool:
    """Under this rule a judged token's status is its u against its min(1, p/q) (an unknown
    name's too: what a reader checks by default)."""
    rule = SPECS.get(name)
    return rule is None or rule.token_fates


def options() -> tuple[str, ...]:
    """Every rule's options (Settings fields), each once: what a trace writes under its rule."""
    return tuple(dict.fromkeys(o for s in SPECS.values() for o in s.options))


def help_text() -> str:
    """Every rule in a line: the --verifier help."""
    return "; ".join(f"{s.name}: {s.description}" for s in SPECS.values())
