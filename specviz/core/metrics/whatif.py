"""What-if estimates: what a session with a smaller K would have seen, from the judged
fates of the rounds it ran (`inspect`, `tune --from-trace`, the cost model's window)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def whatif_fates(rounds: Iterable[Sequence[bool]], k: int) -> dict:
    """An ESTIMATE of what a session with K' = k (smaller than the one run) would have seen:
    from the first k judged positions of each stored round. A K' round ends at the first
    rejection among them, or after k acceptances (then a bonus token); the later positions
    of the real round were drafted with more context and are ignored.

    Returns {"k", "rounds", "acceptance" (accepted / judged), "tokens_per_round",
    "acceptance_by_position"}; rounds with fewer than k judged positions that were not
    ended by a rejection (an end-of-text, a length limit) count with what they have.
    """
    judged = accepted = emitted = n_rounds = 0
    by_judged = [0] * k
    by_accepted = [0] * k
    for fates in rounds:
        fates = list(fates)[:k]
        n_rounds += 1
        judged += len(fates)
        got = 0
        for i, ok in enumerate(fates):
            by_judged[i] += 1
            by_accepted[i] += ok
            if not ok:
                break
            got += 1
        accepted += got
        emitted += got + 1
    return {
        "k": k,
        "rounds": n_rounds,
        "acceptance": accepted / judged if judged else None,
        "tokens_per_round": emitted / n_rounds if n_rounds else None,
        "acceptance_by_position": [
            a / j if j else None for a, j in zip(by_accepted, by_judged, strict=True)
        ],
        "estimate": True,
    }
