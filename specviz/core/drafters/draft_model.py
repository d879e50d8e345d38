"""The model drafter: a second, smaller model with its own KV cache (the classic pair)."""

from __future__ import annotations

import torch
from transformers import DynamicCache

from specviz.core.decoding.forward import forward, max_positions, measure_ms_per_token
from specviz.core.decoding.kv_cache import crop_to
from specviz.core.drafters.base import Drafter, Proposal, draft_loop
from specviz.core.trace.records import ModelInfo


class ModelDrafter(Drafter):
    """A second model with its own cache, which covers a prefix of ids[:-1]."""

    kind = "model"

    def __init__(self, model: torch.nn.Module, info: ModelInfo, vocab: int, eos: int | None):
        self.model, self.info, self.vocab, self.eos = model, info, vocab, eos
        self.max_positions = max_positions(model)
        self.cache = DynamicCache()

    def prefill(self, ids: list[int], target_cache: DynamicCache) -> None:
        self.cache = DynamicCache()
        if len(ids) > 1:
            forward(self.model, ids[:-1], self.cache, self.vocab, keep=1)

    def propose(self, ids, k, config, generator, keep_drafting) -> Proposal:
        feed = ids[self.cache.get_seq_length() :]  # >= 1 token: catches the cache up
        return draft_loop(
            self.model, self.cache, feed, k, config, generator, keep_drafting, self.vocab, self.eos
        )

    def rollback(self, length: int) -> None:
        crop_to(self.cache, min(self.cache.get_seq_length(), length))

    def measure_ms(self, ids: list[int], n_tokens: int) -> float:
        return measure_ms_per_token(self.model, ids, n_tokens, self.vocab)
