"""The model drafter: a second, smaller model with its own KV cache (the classic pair)."""

from __future__ import annotations

import time

import torch
from transformers import DynamicCache

from specviz.core.decoding.forward import forward, max_positions, measure_ms_per_token, pick
from specviz.core.decoding.kv_cache import crop_to
from specviz.core.decoding.proposal import Proposal, TreeShape
from specviz.core.drafters.base import Drafter, draft_loop, fresh_q
from specviz.core.drafters.tree_draft import TreeDraft, draft_tree, keep_tree_path
from specviz.core.trace.records import ModelInfo


class ModelDrafter(Drafter):
    """A second model with its own cache, which covers a prefix of ids[:-1]."""

    kind = "model"

    def __init__(self, model: torch.nn.Module, info: ModelInfo, vocab: int, eos: int | None):
        self.model, self.info, self.vocab, self.eos = model, info, vocab, eos
        self.max_positions = max_positions(model)
        self.cache = DynamicCache()
        self._tree: TreeDraft | None = None  # this round's tree, until keep cuts to its path

    def prefill(self, ids: list[int], target_cache: DynamicCache) -> None:
        self.cache, self._tree = DynamicCache(), None
        if len(ids) > 1:
            forward(self.model, ids[:-1], self.cache, self.vocab, keep=1)

    def propose(self, ids, k, config, generator, keep_drafting) -> Proposal:
        feed = ids[self.cache.get_seq_length() :]  # >= 1 token: catches the cache up
        return draft_loop(
            self.model, self.cache, feed, k, config, generator, keep_drafting, self.vocab, self.eos
        )

    def propose_tree(self, ids, shape: TreeShape, config, generator) -> Proposal:
        """A token tree after ids (core.drafters.tree_draft), on this drafter's cache."""
        feed = ids[self.cache.get_seq_length() :]
        self._tree = draft_tree(self.model, self.cache, feed, shape, config, generator,
                                self.vocab, self.eos)  # fmt: skip
        self._tree_context = len(ids)
        return self._tree.proposal()

    def keep(self, path: tuple[int, ...], length: int) -> None:
        """After a round: a tree's cache keeps the context and the accepted nodes it was fed;
        then, chain or tree, at most `length` positions (the new ids[:-1])."""
        if self._tree is not None:
            keep_tree_path(self.cache, self._tree, self._tree_context, path)
            self._tree = None
        self.rollback(length)

    def next_q(self, ids, config):
        with torch.inference_mode():
            return fresh_q(self.model, ids, self.vocab, config)

    def rollback(self, length: int) -> None:
        crop_to(self.cache, min(self.cache.get_seq_length(), length))

    def measure_ms(self, ids: list[int], n_tokens: int) -> float:
        return measure_ms_per_token(self.model, ids, n_tokens, self.vocab)

    def step_ms(self, ids, config, generator, device) -> float:
        """One draft step on the session's own cache (forward, warp, sample), cropped back."""
        d_len = self.cache.get_seq_length()  # a prefix of ids[:-1]: ids[d_len] is the next token
        start = time.perf_counter()
        logits = forward(self.model, [ids[d_len]], self.cache, self.vocab, keep=1)
        pick(logits[0].to(device), config, generator)  # q goes where p is, as in a round
        ms = 1000 * (time.perf_counter() - start)
        crop_to(self.cache, d_len)
        return ms


def build(params, pair) -> ModelDrafter:
    if pair.draft is None:
        raise ValueError(
            "the model drafter needs a draft model: give --draft, or choose "
            "--drafter lookup or --drafter early-exit"
        )
    if getattr(pair, "draft_tokenizer", None) is not None:
        raise ValueError(
            "the draft's tokenizer differs from the target's: draft with --drafter tli or string"
        )
    return ModelDrafter(pair.draft, pair.draft_info, pair.vocab_size, pair.eos_token_id)
