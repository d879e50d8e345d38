"""A tree session's figures by depth, counted from its rounds' tree records (Round.tree):
at each depth, the nodes the rule tried and those it accepted, and the rounds whose accepted
path reached it; and tokens per target pass (a tree round is one pass of the target). Pure
Python, no Qt.
"""

from __future__ import annotations

from collections.abc import Iterable

from specviz.core.trace.records import Round
from specviz.core.trace.tree_nodes import TreeRecord


class DepthCounts:
    """Running counts over the tree rounds added (chain rounds are skipped)."""

    def __init__(self) -> None:
        self.tried: list[int] = []  # [depth - 1]: nodes tried at that depth (not discarded)
        self.accepted: list[int] = []  # [depth - 1]: nodes accepted there (one a round at most)
        self.rounds = 0  # tree rounds counted: target passes
        self.tokens = 0  # tokens they emitted

    def add(self, rnd: Round) -> None:
        tree = rnd.tree
        if tree is None:
            return
        record = TreeRecord.of(tree)
        for d, fate in zip(record.nodes.depths, record.fate, strict=True):
            while len(self.tried) < d:
                self.tried.append(0)
                self.accepted.append(0)
            if fate != "discarded":
                self.tried[d - 1] += 1
            if fate == "accepted":
                self.accepted[d - 1] += 1
        self.rounds += 1
        self.tokens += rnd.n_emitted

    @property
    def acceptance(self) -> list[float | None]:
        """[depth - 1]: accepted / tried nodes at that depth (None: none tried there)."""
        return [a / t if t else None for a, t in zip(self.accepted, self.tried, strict=True)]

    @property
    def reached(self) -> list[float]:
        """[depth - 1]: the share of rounds whose accepted path reached that depth."""
        return [a / self.rounds for a in self.accepted] if self.rounds else []

    @property
    def tokens_per_pass(self) -> float | None:
        """Emitted tokens per target pass (per round)."""
        return self.tokens / self.rounds if self.rounds else None


def depth_counts(rounds: Iterable[Round]) -> DepthCounts:
    counts = DepthCounts()
    for rnd in rounds:
        counts.add(rnd)
    return counts
