"""Lenient speculative sampling (Leviathan, Kalman & Matias 2023, arXiv:2211.17192,
appendix A.5 "Lenience"): a LOSSY rule for a lenience l in (0, 1]; l = 1 is the exact rule.

A drafted x is kept when u < min(1, p(x) / (l q(x))): a draft the target finds at least
l times as likely as the drafter did is always kept. At the first rejection one token is
drawn from norm(max(0, p - l q)) at that position; if all K are kept the bonus is drawn
from p after the last. For l < 1 the emitted tokens no longer follow p (a token q favours
is kept more often than p allows), which the end-to-end test shows (tests/test_lenient.py).
"""

from __future__ import annotations

import torch

from specviz.core.decoding.verifier import ChainVerifier
from specviz.core.decoding.verify import Verdict, drafted_numbers, judge, residual_distribution
from specviz.core.decoding.warp import sample
from specviz.core.trace.extras.lenient import LenientNumbers

LENIENCE = 0.5  # the registered rule's l (settings carry no lenience of their own)


def lenient_accept(p_x: torch.Tensor, q_x: torch.Tensor, lenience: float) -> torch.Tensor:
    """min(1, p(x) / (l q(x))) elementwise, float64; q(x) = 0 keeps x exactly when p(x) > 0."""
    p_x, q_x = p_x.double(), q_x.double() * lenience
    ratio = torch.where(q_x > 0, p_x / q_x.clamp_min(1e-300), (p_x > 0).double())
    return ratio.clamp(max=1.0)


def verify_lenient(
    p: torch.Tensor,
    q: torch.Tensor,
    draft_tokens: torch.Tensor,
    generator: torch.Generator | None,
    lenience: float = LENIENCE,
) -> tuple[Verdict, list[float]]:
    """(the verdict, min(1, p/(l q)) at each judged position: the test each u was held
    against). p [K+1, V], q [K, V], draft_tokens [K], as core.decoding.verify.verify; the
    verdict's accept_probs are the exact rule's min(1, p/q), recorded for comparison."""
    if not 0 < lenience <= 1:
        raise ValueError(f"lenience must be in (0, 1], not {lenience!r}")
    k = draft_tokens.shape[0]
    p_x, q_x, u = drafted_numbers(p, q, draft_tokens, generator)  # [K] each
    exact, _ = judge(p_x, q_x, u)  # [K]: min(1, p/q), for the record
    accept = lenient_accept(p_x, q_x, lenience)  # [K]
    rejected = (u >= accept).nonzero()
    n_accepted = int(rejected[0, 0]) if rejected.numel() else k
    n_judged = min(n_accepted + 1, k)
    if n_accepted < k:
        next_dist = residual_distribution(p[n_accepted], lenience * q[n_accepted].double())
        status = "resampled"
    else:
        next_dist = p[k].double() / p[k].double().sum()
        status = "bonus"
    verdict = Verdict(
        n_accepted=n_accepted,
        next_token=sample(next_dist, generator),
        next_status=status,
        accept_probs=tuple(exact[:n_judged].tolist()),
        u=tuple(u[:n_judged].tolist()),
        next_dist=next_dist.float(),
    )
    return verdict, accept[:n_judged].tolist()


class LenientVerifier(ChainVerifier):
    """The rule as the engine runs it (core.trace.verifiers' "lenient"), at LENIENCE."""

    kind = "lenient"

    def __init__(self, lenience: float | None = None) -> None:
        self.lenience = lenience  # None: LENIENCE, read at each round

    def verdict(self, p, q, drafts, generator, settings=None):
        lenience = LENIENCE if self.lenience is None else self.lenience
        verdict, tests = verify_lenient(p, q, drafts, generator, lenience)
        return verdict, {"lenient": LenientNumbers(lenience, tuple(tests))}
