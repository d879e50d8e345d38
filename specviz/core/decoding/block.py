"""Block verification (Sun et al., "Block Verification Accelerates Speculative Decoding",
arXiv:2403.10444, ICLR 2025, Algorithm 2): the drafts judged as a block, not one by one.

It is lossless like the token-wise rule (core.decoding.verify) and keeps at least as many
drafted tokens in expectation: a token the token-wise rule would reject can be kept when the
block after it makes up for it. With p_0 = 1 and, for i = 1..K,

    p_i = min(1, p_{i-1} P_i(X_i) / Q_i(X_i))
    h_i = Z_i / (Z_i + 1 - p_i),  Z_i = sum_x max(0, p_i P_{i+1}(x) - Q_{i+1}(x))   (i < K)
    h_K = p_K

the block keeps X_1..X_tau for the largest tau with u_tau < h_tau (tau = 0 when none), then
draws one token from norm(max(0, p_tau P_{tau+1} - Q_{tau+1})) if tau < K, else the bonus from
P_{K+1}. With one-hot p and q (greedy) it keeps the target's argmax prefix, as the token-wise
rule does. P is the target (`target_probs`), Q the draft, as in Leviathan et al.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specviz.core.decoding.verifier import ChainVerifier
from specviz.core.decoding.verify import Verdict, judge, residual_distribution, verify
from specviz.core.decoding.warp import sample
from specviz.core.trace.extras.block import BlockNumbers


@dataclass(frozen=True)
class BlockVerdict:
    """One block verification of K drafts: the kept prefix, the token that ends the round,
    and the block's numbers at each position (what a replay shows)."""

    n_accepted: int  # tau: drafted tokens kept, in order
    next_token: int
    next_status: str  # "resampled" (tau < K) or "bonus" (tau = K)
    weights: tuple[float, ...]  # p_1..p_K: the running acceptance weights
    h: tuple[float, ...]  # h_1..h_K: the probability of stopping the block at i
    u: tuple[float, ...]  # the uniform draw at each position 1..K
    next_dist: torch.Tensor  # [V] the distribution next_token was drawn from


def block_residual(weight: float, p_next: torch.Tensor, q_next: torch.Tensor) -> torch.Tensor:
    """norm(max(0, weight P - Q)) [V] float64: the token-wise residual of weight x P (P
    itself when that has no mass)."""
    return residual_distribution(weight * p_next.double(), q_next)


def block_numbers(
    target_probs: torch.Tensor, draft_probs: torch.Tensor, draft_tokens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(p_1..p_K, h_1..h_K), float64 [K] each, for P [K+1, V], Q [K, V] and X [K]."""
    k = draft_tokens.shape[0]
    positions = torch.arange(k, device=target_probs.device)
    p_x = target_probs[positions, draft_tokens].double()  # [K]
    q_x = draft_probs[positions, draft_tokens].double()  # [K]
    # q(x) = 0 for a token the draft really sampled cannot be; if passed, the ratio is
    # infinite where p(x) > 0 (never divide by 0).
    ratio = torch.where(q_x > 0, p_x / q_x.clamp_min(1e-300), (p_x > 0).double() * 2.0)
    weights = torch.empty(k, dtype=torch.float64, device=target_probs.device)
    running = 1.0
    for i in range(k):  # p_i = min(1, p_{i-1} P_i(X_i) / Q_i(X_i))
        running = min(1.0, running * float(ratio[i]))
        weights[i] = running
    h = torch.empty_like(weights)
    for i in range(k - 1):  # h_i for i < K: the block may stop after X_i
        z = float((weights[i] * target_probs[i + 1].double() - draft_probs[i + 1].double())
                  .clamp_min(0.0).sum())  # fmt: skip
        denominator = z + 1.0 - float(weights[i])
        # 0 / 0 when p_i = 1 and P_{i+1} = Q_{i+1}: nothing to stop for; keep going (h = 1
        # keeps the prefix if no later stop is drawn, and its residual falls back to P).
        h[i] = z / denominator if denominator > 0 else 1.0
    if k:
        h[k - 1] = weights[k - 1]  # h_K = p_K
    return weights, h


def verify_block(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    draft_tokens: torch.Tensor,
    generator: torch.Generator | None = None,
) -> BlockVerdict:
    """Block verification of K drafts: P [K+1, V], Q [K, V], X [K] -> BlockVerdict."""
    k = draft_tokens.shape[0]
    if target_probs.shape[0] != k + 1 or draft_probs.shape[0] != k:
        raise ValueError(
            f"verify_block: p {tuple(target_probs.shape)}, q {tuple(draft_probs.shape)} "
            f"for K={k} drafts"
        )
    weights, h = block_numbers(target_probs, draft_probs, draft_tokens)
    u = torch.rand(k, generator=generator, dtype=torch.float64, device=target_probs.device)
    stops = (u < h).nonzero()  # strict, as the token-wise test: h = 0 never stops
    tau = int(stops[-1, 0]) + 1 if stops.numel() else 0  # the largest i with u_i < h_i
    if tau < k:
        weight = 1.0 if tau == 0 else float(weights[tau - 1])
        next_dist = block_residual(weight, target_probs[tau], draft_probs[tau])
        status = "resampled"
    else:
        next_dist = target_probs[k].double() / target_probs[k].double().sum()
        status = "bonus"
    return BlockVerdict(
        n_accepted=tau,
        next_token=sample(next_dist, generator),
        next_status=status,
        weights=tuple(weights.tolist()),
        h=tuple(h.tolist()),
        u=tuple(u.tolist()),
        next_dist=next_dist.float(),
    )


def block_as_verdict(
    block: BlockVerdict, target_probs: torch.Tensor, draft_probs: torch.Tensor, drafts
) -> Verdict:
    """The block's outcome in the token-wise vocabulary a round record uses: X_1..X_tau
    accepted, X_{tau+1} rejected (when tau < K), later drafts discarded; each judged token
    carries its token-wise min(1, p/q) (for comparison) and the block's draw. The block's
    own numbers go into the round (Round.block)."""
    k = len(block.u)
    n_judged = min(block.n_accepted + 1, k)
    positions = torch.arange(n_judged, device=target_probs.device)
    chosen = drafts[:n_judged]
    p_x = target_probs[positions, chosen]
    q_x = draft_probs[positions, chosen]
    u = torch.tensor(block.u[:n_judged], dtype=torch.float64)
    accept, _ = judge(p_x.cpu(), q_x.cpu(), u)
    return Verdict(
        n_accepted=block.n_accepted,
        next_token=block.next_token,
        next_status=block.next_status,
        accept_probs=tuple(accept.tolist()),
        u=block.u[:n_judged],
        next_dist=block.next_dist,
    )


class BlockVerifier(ChainVerifier):
    """The rule as the engine runs it (core.trace.verifiers' "block")."""

    kind = "block"

    def verdict(self, p, q, drafts, generator, settings=None):
        if drafts.shape[0] == 0:  # nothing drafted: the bonus token, as token-wise
            return verify(p, q, drafts, generator), {}
        block = verify_block(p, q, drafts, generator)
        numbers = BlockNumbers(tuple(block.weights), tuple(block.h), tuple(block.u))
        return block_as_verdict(block, p, q, drafts), {"block": numbers}
