"""How a rule other than token-wise (block, typical) differs from it on the same draws: where
the token-wise rule would have stopped, and the drafts the round's rule kept beyond it (the
stream's and the distribution panel's marks). A round's rule numbers themselves are extras
(core.trace.extras.block, core.trace.extras.typical).
"""

from __future__ import annotations

from specviz.core.trace import verifiers
from specviz.core.trace.records import JUDGED, Round


def token_wise_stop(rnd: Round) -> int | None:
    """Under a rule other than token-wise (block, typical): the judged position at which the
    token-wise rule, with the round's own draws u and min(1, p/q), would have stopped (the
    first u >= accept_prob), or None if it would have kept every judged draft too. The
    accepted tokens from there on are what the rule kept beyond it."""
    judged = [t for t in rnd.tokens if t.status in JUDGED]
    for i, t in enumerate(judged):
        if t.u is not None and t.accept_prob is not None and not t.u < t.accept_prob:
            return i
    return None


def kept_beyond_token_stop(rnd: Round) -> set[int]:
    """Indexes into rnd.tokens of the accepted drafts the token-wise rule, with the same
    draws, would not have kept (empty for a token-wise round)."""
    if rnd.settings is None or verifiers.token_fates(rnd.settings.verifier):
        return set()
    stop = token_wise_stop(rnd)
    if stop is None:
        return set()
    judged = [j for j, t in enumerate(rnd.tokens) if t.status in JUDGED]
    return {j for j in judged[stop:] if rnd.tokens[j].status == "accepted"}
