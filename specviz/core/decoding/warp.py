"""From logits to the distributions speculative decoding samples from, and sampling them.

`warp()` turns logits into probabilities (temperature, top-k, top-p); target and draft go
through the same function with the same settings, so p and q are the distributions that
tokens are really drawn from. `sample()` draws from them by inverse CDF.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import LogitsProcessorList, TopKLogitsWarper, TopPLogitsWarper

from specviz.core.trace.records import check_sampling


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
