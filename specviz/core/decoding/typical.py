"""Medusa's typical acceptance (Cai et al. 2024, arXiv:2401.10774, section 2.3.1): a LOSSY
rule, shown beside the exact ones so a user can see what it does to the output.

A drafted x at a position is kept while p(x) > min(epsilon, delta * exp(-H(p))), H the
target's entropy there; at the first draft that fails, one token is drawn from p itself (no
residual), and if all K pass, the bonus from p after the last. q plays no part, so the
emitted tokens do not follow p: a token the draft proposes often and p gives a little more
than the threshold is kept every time. Greedy (p one-hot) keeps exactly the argmax drafts,
the token-wise result.

The lab's numpy version is core.lab.sequence (rule "typical"); tests hold the two equal.
"""

from __future__ import annotations

import torch

from specviz.core.decoding.verifier import ChainVerifier
from specviz.core.decoding.verify import Verdict, drafted_numbers, judge
from specviz.core.decoding.warp import sample
from specviz.core.trace.extras.typical import TypicalThresholds

# Medusa's evaluate_posterior defaults (posterior_threshold, posterior_alpha); its
# medusa_generate passes them the other way round (0.09, 0.3).
TYPICAL_EPSILON, TYPICAL_DELTA = 0.3, 0.09


def typical_threshold(p: torch.Tensor, epsilon: float, delta: float) -> torch.Tensor:
    """min(epsilon, delta * exp(-H(p))) per row of p [..., V] (0 log 0 = 0) -> float64 [...]."""
    p = p.double()
    entropy = -torch.where(p > 0, p * p.clamp_min(1e-300).log(), torch.zeros_like(p)).sum(-1)
    return torch.clamp(delta * torch.exp(-entropy), max=epsilon)


def verify_typical(
    p: torch.Tensor,
    q: torch.Tensor,
    draft_tokens: torch.Tensor,
    generator: torch.Generator | None,
    epsilon: float = TYPICAL_EPSILON,
    delta: float = TYPICAL_DELTA,
) -> tuple[Verdict, list[float]]:
    """(the verdict, the threshold at each judged position).

    p [K+1, V], q [K, V], draft_tokens [K], as core.decoding.verify. The verdict's
    accept_probs and u are the token-wise rule's min(1, p/q) and a fresh uniform, recorded
    for comparison only: here a token's fate is p(x) against the threshold.
    """
    k = draft_tokens.shape[0]
    p_x, q_x, u = drafted_numbers(p, q, draft_tokens, generator)  # [K] each
    accept, _ = judge(p_x, q_x, u)  # [K]: min(1, p/q), for the record
    threshold = typical_threshold(p[:k], epsilon, delta)  # [K]
    failed = (p_x <= threshold).nonzero()
    n_accepted = int(failed[0, 0]) if failed.numel() else k
    n_judged = min(n_accepted + 1, k)
    at = n_accepted  # the position whose token ends the round: from p itself
    next_dist = p[at].double() / p[at].double().sum()
    next_token = sample(next_dist, generator)
    verdict = Verdict(
        n_accepted=n_accepted,
        next_token=next_token,
        next_status="resampled" if n_accepted < k else "bonus",
        accept_probs=tuple(accept[:n_judged].tolist()),
        u=tuple(u[:n_judged].tolist()),
        next_dist=next_dist.float(),
    )
    return verdict, threshold[:n_judged].tolist()


class TypicalVerifier(ChainVerifier):
    """The rule as the engine runs it (core.trace.verifiers' "typical"), with its options
    from the round's settings."""

    kind = "typical"

    def verdict(self, p, q, drafts, generator, settings=None):
        epsilon = settings.typical_epsilon if settings is not None else TYPICAL_EPSILON
        delta = settings.typical_delta if settings is not None else TYPICAL_DELTA
        verdict, threshold = verify_typical(p, q, drafts, generator, epsilon, delta)
        return verdict, {"typical": TypicalThresholds(tuple(threshold))}
