"""From logits to the distributions speculative decoding samples from, and the rule itself.

`warp()` turns logits into probabilities (temperature, top-k, top-p); target and draft go
through the same function with the same settings, so p and q are the distributions that
tokens are really drawn from. `verify()` is the accept / reject / resample / bonus rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import LogitsProcessorList, TopKLogitsWarper, TopPLogitsWarper

from specviz.core.checks import check_sampling

# Below this total mass the residual max(0, p - q) is treated as empty and p is used instead.
# It can only be that small when p and q agree to float precision, where both are exact.
RESIDUAL_EPS = 1e-12


@dataclass(frozen=True)
class SamplingConfig:
    """How logits become probabilities; shared by target and draft."""

    temperature: float = 1.0  # 0 = greedy: a one-hot distribution at the argmax
    top_k: int = 0  # 0 = keep the whole vocabulary
    top_p: float = 1.0  # 1.0 = no nucleus cut

    def validate(self) -> None:
        check_sampling(self.temperature, self.top_k, self.top_p)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def warp(logits: torch.Tensor, config: SamplingConfig) -> torch.Tensor:
    """Probabilities from logits [..., V] -> float32 [..., V], each row summing to 1.

    Temperature, then top-k, then top-p, in the order transformers' `generate` applies them,
    using its own logits warpers. Greedy gives a one-hot row at the argmax.
    """
    logits = logits.float()
    if config.greedy:
        return torch.nn.functional.one_hot(logits.argmax(dim=-1), num_classes=logits.shape[-1]).to(
            torch.float32
        )
    scores = logits / config.temperature
    warpers = LogitsProcessorList()
    if config.top_k > 0:
        warpers.append(TopKLogitsWarper(top_k=config.top_k))
    if config.top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=config.top_p))
    if warpers:
        shape = scores.shape
        flat = scores.reshape(-1, shape[-1])  # the warpers take [batch, V]
        scores = warpers(None, flat).reshape(shape)
    return torch.softmax(scores, dim=-1)


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
    if p.shape[0] != k + 1 or q.shape[0] != k or p.shape[-1] != q.shape[-1]:
        raise ValueError(f"verify: p {tuple(p.shape)}, q {tuple(q.shape)} for K={k} drafts")
    positions = torch.arange(k, device=p.device)
    p_x = p[positions, draft_tokens].double()  # [K]
    q_x = q[positions, draft_tokens].double()  # [K]
    u = torch.rand(k, generator=generator, dtype=torch.float64, device=p.device)  # [K]
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


def sample(probs: torch.Tensor, generator: torch.Generator | None = None) -> int:
    """One token from a probability row [V] (need not sum to exactly 1), by inverse CDF.

    Exact like torch.multinomial and about 4x faster for one draw over a large vocabulary
    on CPU. A token of probability 0 is never returned: its CDF step is empty.
    """
    u = torch.rand((), generator=generator, dtype=torch.float64, device=probs.device)
    return int(_inverse_cdf(probs, u))


def sample_n(probs: torch.Tensor, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """n independent tokens from one probability row [V], by the same inverse CDF. [n]"""
    u = torch.rand(n, generator=generator, dtype=torch.float64, device=probs.device)
    return _inverse_cdf(probs, u)


def _inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Indices where uniform draws u [...] in [0, 1) fall on the CDF of probs [V]. [...]"""
    cdf = probs.double().cumsum(0)  # [V]
    index = torch.searchsorted(cdf, u * cdf[-1], right=True)
    if bool((index >= cdf.shape[0]).any()):  # u rounded up onto the total
        index = index.clamp(max=int((probs > 0).nonzero()[-1]))  # the last token with mass
    return index
