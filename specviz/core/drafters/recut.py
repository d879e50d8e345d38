"""A draft model with its own tokenizer (core.drafters.tli, core.drafters.string_bridge):
it reads the target's text as its own tokenizer cuts it, on a cache of its own.

Each round re-cuts the context and keeps the cached positions the new cut agrees with (BPE
may merge across the point where the text grew), so the cache always equals a fresh pass
over its ids; what the round drafts is fed on top and cut away by the next round's re-cut
where the target kept something else.
"""

from __future__ import annotations

from transformers import DynamicCache

from specviz.core.decoding.forward import forward, max_positions, measure_ms_per_token
from specviz.core.decoding.kv_cache import crop_to
from specviz.core.drafters.base import Drafter, cache_device
from specviz.core.trace.records import ModelInfo


class RecutDraft(Drafter):
    """A draft model, its tokenizer and its cache over its own cut of the target's text."""

    def __init__(self, model, draft_tok, target_tok, info: ModelInfo, vocab: int, eos):
        self.model, self.draft_tok, self.target_tok = model, draft_tok, target_tok
        self.info, self.vocab, self.eos = info, vocab, eos
        self.draft_vocab = model.get_output_embeddings().weight.shape[0]
        self.device = cache_device(model)
        self.max_positions = max_positions(model)  # in the draft's tokens
        self.cache = DynamicCache()
        self.cached: list[int] = []  # the draft ids the cache covers

    def text(self, ids: list[int]) -> str:
        """The target's ids as text (special tokens as their text)."""
        return self.target_tok.decode(ids, clean_up_tokenization_spaces=False)

    def draft_ids(self, ids: list[int]) -> list[int]:
        """The draft's cut of the target's text ids (never empty)."""
        return self.draft_tok.encode(self.text(ids), add_special_tokens=False) or [self._fallback()]

    def _fallback(self) -> int:
        bos = self.draft_tok.bos_token_id
        return bos if bos is not None else 0

    def prefill(self, ids, target_cache) -> None:
        self.cache, self.cached = DynamicCache(), []
        self.catch_up(self.draft_ids(ids))

    def catch_up(self, d_ids: list[int]) -> list[int]:
        """Crop the cache to its agreement with d_ids (leaving >= 1 token to feed) and feed
        what it lacks but the last; returns the tokens still to feed (the last one)."""
        keep = 0
        for a, b in zip(self.cached, d_ids[:-1], strict=False):
            if a != b:
                break
            keep += 1
        crop_to(self.cache, keep)
        if len(d_ids) - 1 > keep:
            forward(self.model, d_ids[keep:-1], self.cache, self.draft_vocab, keep=1)
        self.cached = d_ids[:-1]
        return d_ids[-1:]

    def step(self, feed: list[int]):
        """The draft's logits [V_draft] after feeding `feed` on its cache."""
        logits = forward(self.model, feed, self.cache, self.draft_vocab, keep=1)[0]
        self.cached = self.cached + feed
        return logits

    def fresh_logits(self, ids: list[int]):
        """The draft's next-token logits after ids from a fresh pass (its cache untouched)."""
        return forward(self.model, self.draft_ids(ids), DynamicCache(), self.draft_vocab, keep=1)[0]

    def measure_ms(self, ids, n_tokens) -> float:
        return measure_ms_per_token(self.model, self.draft_ids(ids), n_tokens, self.draft_vocab)
