"""Acceptance by drafted position: where each judged draft of a round stands, in one place.

A chain's j-th judged token stands at position j (1-based); a token tree's every node the
rule tried stands at its depth (core.trace.tree_nodes: a child of the context is at depth
1), so that position i of a chain and depth i of a tree are the same figure, the i-th
drafted token of what the round emitted. `judged_pairs` is that one placement;
`PositionCounts` folds it (the conditional rate at i: accepted / judged there), and
`DepthCounts` adds what the Tree tab shows of trees (rounds, tokens per target pass, the
share of rounds reaching each depth). RunningStats, the cost model, tune's table, `inspect`
and the window all count through them.

Not this figure: vLLM's (and Spec-Bench's) unconditional rate per position, rounds whose
draft i was accepted over rounds that drafted a position i, is bench_table's
`accepted_by_position`, named apart. Pure Python, no torch.
"""

from __future__ import annotations

from collections.abc import Iterable

from specviz.core.trace.records import JUDGED, Round


def judged_pairs(rnd: Round) -> list[tuple[int, bool]]:
    """(position, accepted?) of each draft the round's rule judged, position from 1: a
    chain's in token order, a tree's tried nodes at their depths, in node order."""
    if rnd.tree is not None:
        return rnd.tree.tried_by_depth()
    judged = (t.status == "accepted" for t in rnd.tokens if t.status in JUDGED)
    return [(i, ok) for i, ok in enumerate(judged, start=1)]


def judged_fates(rnd: Round) -> list[bool]:
    """Accepted (True) / rejected (False) of each judged draft, in judged_pairs' order."""
    return [ok for _, ok in judged_pairs(rnd)]


class PositionCounts:
    """Judged and accepted drafts at each position (a tree's: depth), folded a round at a
    time. One owner thread."""

    def __init__(self) -> None:
        self.judged: list[int] = []  # [position - 1]: drafts judged there
        self.accepted: list[int] = []  # [position - 1]: drafts accepted there

    def add(self, rnd: Round) -> list[tuple[int, bool]]:
        """Fold one round in; its judged_pairs."""
        pairs = judged_pairs(rnd)
        self.add_pairs(pairs)
        return pairs

    def add_pairs(self, pairs: Iterable[tuple[int, bool]]) -> None:
        for position, ok in pairs:
            while len(self.judged) < position:
                self.judged.append(0)
                self.accepted.append(0)
            self.judged[position - 1] += 1
            self.accepted[position - 1] += ok

    @property
    def total_judged(self) -> int:
        return sum(self.judged)

    @property
    def total_accepted(self) -> int:
        return sum(self.accepted)

    @property
    def acceptance(self) -> float | None:
        """Accepted / judged drafts, every position together (None: none judged)."""
        judged = self.total_judged
        return self.total_accepted / judged if judged else None

    @property
    def by_position(self) -> list[float | None]:
        """[position - 1]: accepted / judged there (None: none judged there)."""
        return [a / j if j else None for a, j in zip(self.accepted, self.judged, strict=True)]


def position_counts(rounds: Iterable[Round]) -> PositionCounts:
    counts = PositionCounts()
    for rnd in rounds:
        counts.add(rnd)
    return counts


class DepthCounts(PositionCounts):
    """A tree session's figures by depth (the Tree tab's plot): PositionCounts over its tree
    rounds (chain rounds are skipped), the rounds counted (target passes) and the tokens they
    emitted."""

    def __init__(self) -> None:
        super().__init__()
        self.rounds = 0  # tree rounds counted: target passes
        self.tokens = 0  # tokens they emitted

    def add(self, rnd: Round) -> list[tuple[int, bool]]:
        if rnd.tree is None:
            return []
        self.rounds += 1
        self.tokens += rnd.n_emitted
        return super().add(rnd)

    @property
    def tried(self) -> list[int]:
        """[depth - 1]: nodes the rule tried at that depth (PositionCounts.judged)."""
        return self.judged

    @property
    def reached(self) -> list[float]:
        """[depth - 1]: the share of rounds whose accepted path reached that depth (one
        accepted node a depth at most)."""
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
