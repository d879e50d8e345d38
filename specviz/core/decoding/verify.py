"""The token-wise rule: accept / reject / resample / bonus (Leviathan et al. 2023,
arXiv:2211.17192, Algorithm 1), and the distributions it is made of (min(p, q), the
residual norm(max(0, p - q))).

p and q come from specviz.core.decoding.warp, the same warp for target and draft.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specviz.core.decoding.warp import sample

# Below this total mass the residual max(0, p - q) is treated as empty and p is used instead.
# It can only be that small when p and q agree to float precision, where both are exact.
RESIDUAL_EPS = 1e-12


def acceptance_mass(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """alpha = sum_x min(p(x), q(x)): the probability that a draft from q is accepted. [...]"""
    return torch.minimum(p, q).sum(-1)


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)) for one position [V] -> float64 [V].

    When the residual has (nearly) no mass, p and q agree to float precision and a
    rejection has probability ~0; p itself is then the exact answer (never 0 / 0).
    """
    residual = (p.double() - q.double()).clamp_min(0.0)  # [V]
    mass = residual.sum()
    if mass <= RESIDUAL_EPS:
        return p.double() / p.double().sum()
    return residual / mass


def judge(
    p_x: torch.Tensor, q_x: torch.Tensor, u: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The accept test, elementwise over any shape: (min(1, p(x)/q(x)), u < it).

    p_x, q_x: target and draft probabilities of the drafted tokens; u: uniform draws in
    [0, 1). verify() runs it over the K positions of a round, the lab over many independent
    runs at one position: the same test, so the lab's Monte Carlo shows the engine's rule.
    """
    p_x, q_x = p_x.double(), q_x.double()
    # min(1, p/q). q(x) > 0 for any token the draft really sampled; if a caller passes
    # q(x) = 0 the ratio is infinite, so accept exactly when p(x) > 0 (never divide by 0).
    ratio = torch.where(q_x > 0, p_x / q_x.clamp_min(1e-300), (p_x > 0).double())
    accept = ratio.clamp(max=1.0)
    # Strict "<": a token with p(x) = 0 has accept 0 and is never kept, even for u = 0.
    return accept, u < accept


@dataclass(frozen=True)
class Verdict:
    """The outcome of one verification of K drafted tokens."""

    n_accepted: int  # 0..K: drafted tokens kept, in order
    next_token: int  # the token that ends the round
    next_status: str  # "resampled" (after a rejection) or "bonus" (all K accepted)
    accept_probs: tuple[float, ...]  # min(1, p(x)/q(x)) for each judged position
    u: tuple[float, ...]  # the uniform draw used at each judged position
    # The normalised distribution next_token was drawn from: norm(max(0, p - q)) after a
    # rejection (p itself in the degenerate case), p[K] for a bonus token. [V]
    next_dist: torch.Tensor

    @property
    def n_judged(self) -> int:
        return len(self.accept_probs)


def drafted_numbers(
    p: torch.Tensor, q: torch.Tensor, draft_tokens: torch.Tensor, generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(p(x_i), q(x_i), u_i) float64 [K] of a round's K drafts, u_i fresh uniforms; checks
    the shapes (p [K+1, V], q [K, V]). What every chain rule starts from."""
    k = draft_tokens.shape[0]
    if p.shape[0] != k + 1 or q.shape[0] != k or p.shape[-1] != q.shape[-1]:
        raise ValueError(f"verify: p {tuple(p.shape)}, q {tuple(q.shape)} for K={k} drafts")
    positions = torch.arange(k, device=p.device)
    p_x = p[positions, draft_tokens].double()  # [K]
    q_x = q[positions, draft_tokens].double()  # [K]
    u = torch.rand(k, generator=generator, dtype=torch.float64, device=p.device)  # [K]
    return p_x, q_x, u


def verify(
    p: torch.Tensor,
    q: torch.Tensor,
    draft_tokens: torch.Tensor,
    generator: torch.Generator | None = None,
) -> Verdict:
    """Speculative sampling: Leviathan et al. 2023 (arXiv:2211.17192), Algorithm 1.

    p: target probabilities at the K drafted positions and the bonus position. [K+1, V]
    q: draft probabilities that draft_tokens were sampled from. [K, V]
    draft_tokens: the drafted tokens. [K]

    Each drafted x is kept when u < min(1, p(x)/q(x)), u ~ U[0, 1). At the first rejection
    one token is drawn from norm(max(0, p - q)) at that position and the round ends; if all
    K are kept a bonus token is drawn from p[K]. The emitted tokens then follow p exactly.
    """
    k = draft_tokens.shape[0]
    p_x, q_x, u = drafted_numbers(p, q, draft_tokens, generator)  # [K] each
    accept, keep = judge(p_x, q_x, u)  # [K], [K]
    rejected = (~keep).nonzero()
    n_accepted = int(rejected[0, 0]) if rejected.numel() else k
    n_judged = min(n_accepted + 1, k)
    accept_probs = tuple(accept[:n_judged].tolist())
    draws = tuple(u[:n_judged].tolist())

    if n_accepted < k:
        # Rejected at position n: draw from the residual norm(max(0, p - q)), the mass that
        # the acceptance path min(p, q) left uncovered.
        next_dist = residual_distribution(p[n_accepted], q[n_accepted])
        status = "resampled"
    else:
        # All K kept: the target's distribution after the last drafted token, for free.
        next_dist = p[k].double() / p[k].double().sum()
        status = "bonus"
    next_token = sample(next_dist, generator)
    return Verdict(
        n_accepted=n_accepted,
        next_token=next_token,
        next_status=status,
        accept_probs=accept_probs,
        u=draws,
        next_dist=next_dist.float(),
    )
