"""Drafters: what proposes the K tokens of a round, and the q each was drawn from.

A drafter proposes up to k tokens after the context, with q [k, V]: the distribution each
token was drawn from (one-hot for a deterministic drafter). `verify()` judges them the same
way whatever drafted them, so the output follows the target's p for every drafter. With a
one-hot q a drafted x is kept with probability min(1, p(x)/1) = p(x), and a rejection
resamples from norm(max(0, p - q)): p with x removed, renormalised.

- model: a second, smaller model (the classic pair); its own KV cache.
- lookup: transformers' prompt lookup decoding, no model: find the context's last n tokens
  earlier in the context and copy what followed them.
- early-exit: the target's own first L layers, final norm and head (early_exit.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

from specviz.core.decoding.forward import forward
from specviz.core.decoding.warp import SamplingConfig, sample, warp
from specviz.core.trace.records import ModelInfo

DRAFTERS = ("model", "lookup", "early-exit")
# Called after each drafted token with the draft's probability of it: draft another?
KeepDrafting = Callable[[float], bool]


@dataclass(frozen=True)
class DrafterConfig:
    """Which drafter, and its parameters (names after transformers' generate options)."""

    kind: str = "model"  # one of DRAFTERS
    ngram_max: int = 2  # lookup: longest n-gram matched (max_matching_ngram_size, default 2)
    exit_layer: int | None = None  # early-exit: the target layers that draft (None: half)

    def validate(self) -> None:
        if self.kind not in DRAFTERS:
            raise ValueError(f"unknown drafter '{self.kind}' (one of {', '.join(DRAFTERS)})")
        if self.kind == "lookup" and not 1 <= self.ngram_max <= 64:
            raise ValueError(f"the n-gram size must be between 1 and 64, got {self.ngram_max}")
        if self.kind == "early-exit" and self.exit_layer is not None and self.exit_layer < 1:
            raise ValueError(f"the exit layer must be >= 1, got {self.exit_layer}")


@dataclass(frozen=True)
class Proposal:
    """What a drafter proposed for one round."""

    tokens: list[int]  # the drafted tokens, k or fewer
    q: torch.Tensor  # [len(tokens), V] the distribution each token was drawn from
    stop: str  # why drafting stopped: "k", "eos", "threshold" or "no_match" (STOP_REASONS)
    copied_from: tuple[int, int] | None = None  # lookup: [start, end) in the context ids


class Drafter:
    """The interface. The engine calls prefill once, then per round propose and rollback;
    `cache` is the target's cache, which a drafter may share (early exit)."""

    kind = "?"
    info: ModelInfo  # the trace header's "draft": what drafted
    max_positions: int | None = None  # the longest context the drafter can read

    def describe(self) -> dict[str, Any]:
        """The trace header's `drafter` field: the kind and the parameters in use."""
        return {"kind": self.kind}

    def prefill(self, ids: list[int], target_cache: DynamicCache) -> None:
        """A new session on ids; the target's cache already covers ids[:-1]."""

    def propose(
        self,
        ids: list[int],
        k: int,
        config: SamplingConfig,
        generator: torch.Generator,
        keep_drafting: KeepDrafting | None,
    ) -> Proposal:
        raise NotImplementedError

    def rollback(self, length: int) -> None:
        """After verification: only ids[:length] are valid context from now on."""

    def measure_ms(self, ids: list[int], n_tokens: int) -> float:
        """Median time of one drafting step after ids (the c of the predicted speedup)."""
        raise NotImplementedError


def draft_loop(
    model: torch.nn.Module,
    cache: DynamicCache,
    feed: list[int],
    k: int,
    config: SamplingConfig,
    generator: torch.Generator,
    keep_drafting: KeepDrafting | None,
    vocab: int,
    eos: int | None,
) -> Proposal:
    """Up to k tokens from a model, one forward each, each sampled from the warped q it is
    judged by. feed: the tokens the cache lacks (>= 1). The stop reason is "k", "eos" or
    "threshold" (the draft's probability of its token, at temperature 1 when greedy)."""
    tokens: list[int] = []
    q_rows: list[torch.Tensor] = []
    stop = "k"
    for _ in range(k):
        logits = forward(model, feed, cache, vocab, keep=1)[0]  # [V]
        q_i = warp(logits, config)  # [V]
        token = sample(q_i, generator)
        q_rows.append(q_i)
        tokens.append(token)
        feed = [token]
        if token == eos:
            stop = "eos"  # nothing after an end-of-text token can be emitted
            break
        if keep_drafting is not None and len(tokens) < k:
            confidence = torch.softmax(logits.float(), -1)[token] if config.greedy else q_i[token]
            if not keep_drafting(float(confidence)):
                stop = "threshold"
                break
    q = torch.stack(q_rows) if q_rows else torch.zeros((0, vocab), device=cache_device(model))
    return Proposal(tokens, q, stop)


def cache_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device
