"""What-if estimates: what a session with a smaller K would have seen, from the judged
fates of the rounds it ran (`inspect`, `tune --from-trace`, the cost model's window)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from specviz.core.metrics.positions import PositionCounts


def whatif_fates(rounds: Iterable[Sequence[bool]], k: int) -> dict:
    """An ESTIMATE of what a session with K' = k (smaller than the one run) would have seen:
    from the first k judged positions of each stored round. A K' round ends at the first
    rejection among them, or after k acceptances (then a bonus token); the later positions
    of the real round were drafted with more context and are ignored.

    Returns {"k", "rounds", "acceptance" (accepted / judged), "tokens_per_round",
    "acceptance_by_position"}; rounds with fewer than k judged positions that were not
    ended by a rejection (an end-of-text, a length limit) count with what they have.
    """
    counts = PositionCounts()  # what the K' rounds would have judged, by position
    emitted = n_rounds = 0
    for fates in rounds:
        fates = list(fates)[:k]
        n_rounds += 1
        kept = next((i for i, ok in enumerate(fates) if not ok), len(fates))  # the rejection
        counts.add_pairs((i, ok) for i, ok in enumerate(fates[: kept + 1], start=1))
        emitted += kept + 1
    by_position = counts.by_position
    return {
        "k": k,
        "rounds": n_rounds,
        "acceptance": counts.acceptance,
        "tokens_per_round": emitted / n_rounds if n_rounds else None,
        "acceptance_by_position": by_position + [None] * (k - len(by_position)),
        "estimate": True,
    }
