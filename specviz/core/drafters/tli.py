"""TLI: a draft model whose tokenizer differs from the target's (token-level intersection,
Timor et al., "Lossless speculative decoding for heterogeneous vocabularies",
arXiv:2502.05202; transformers' universal assisted generation bridges by strings instead).

The draft reads the target's text as its own tokenizer cuts it, and draws each token from
its distribution restricted to the tokens both vocabularies share (core.models.vocab_bridge)
and renormalised: the drafted token is the target token with the same string, and q (that
restricted distribution, placed at the target's ids) is what verify() judges it by. verify()
is exact for any q, so the output follows the target's p at every temperature; the price is
the target tokens the draft can never propose (the trace header's `shared_tokens`).

The draft's cache holds its tokenization of a prefix of the text; each round re-cuts the
context and keeps the cached positions the new cut agrees with (BPE may merge across the
point where the text grew), so the cache always equals a fresh pass over its ids.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from specviz.core.decoding.forward import forward, max_positions, measure_ms_per_token
from specviz.core.decoding.kv_cache import crop_to
from specviz.core.decoding.warp import sample, warp
from specviz.core.drafters.base import Drafter, DrafterSpec, Proposal, cache_device
from specviz.core.models.vocab_bridge import VocabBridgeError, shared_ids
from specviz.core.trace.records import ModelInfo


class TliDrafter(Drafter):
    """A draft model with its own tokenizer and cache, drafting the shared tokens only."""

    kind = "tli"

    def __init__(self, model, draft_tok, target_tok, info: ModelInfo, vocab: int, eos):
        self.model, self.draft_tok, self.target_tok = model, draft_tok, target_tok
        self.info, self.vocab, self.eos = info, vocab, eos
        self.draft_vocab = model.get_output_embeddings().weight.shape[0]
        d_ids, t_ids = shared_ids(target_tok, draft_tok, vocab, self.draft_vocab)
        device = cache_device(model)
        self.d_ids, self.t_ids = d_ids.to(device), t_ids.to(device)
        # target id -> draft id
        self.to_draft = dict(zip(t_ids.tolist(), d_ids.tolist(), strict=True))
        self.max_positions = max_positions(model)  # in the draft's tokens
        self.cache = DynamicCache()
        self.cached: list[int] = []  # the draft ids the cache covers

    def describe(self):
        return {"kind": self.kind, "shared_tokens": len(self.to_draft),
                "target_vocab": self.vocab, "draft_vocab": self.draft_vocab}  # fmt: skip

    def draft_ids(self, ids: list[int]) -> list[int]:
        """The draft's cut of the target's text ids (special tokens as their text)."""
        text = self.target_tok.decode(ids, clean_up_tokenization_spaces=False)
        return self.draft_tok.encode(text, add_special_tokens=False) or [self._fallback()]

    def _fallback(self) -> int:
        bos = self.draft_tok.bos_token_id
        return bos if bos is not None else int(self.d_ids[0])

    def prefill(self, ids, target_cache) -> None:
        self.cache, self.cached = DynamicCache(), []
        self._catch_up(self.draft_ids(ids))

    def _catch_up(self, d_ids: list[int]) -> list[int]:
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

    def _restricted(self, logits: torch.Tensor) -> torch.Tensor:
        """The draft's logits [V_draft] placed at the shared tokens' target ids [V]; -inf
        elsewhere (probability 0 after warp)."""
        full = torch.full((self.vocab,), float("-inf"), device=logits.device)
        full[self.t_ids] = logits.float()[self.d_ids]
        return full

    def propose(self, ids, k, config, generator, keep_drafting) -> Proposal:
        feed = self._catch_up(self.draft_ids(ids))
        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        stop = "k"
        for _ in range(k):
            logits = self._restricted(
                forward(self.model, feed, self.cache, self.draft_vocab, keep=1)[0]
            )  # [V]
            self.cached = self.cached + feed
            q_i = warp(logits, config)  # [V], 0 outside the shared tokens
            token = sample(q_i, generator)
            rows.append(q_i)
            tokens.append(token)
            feed = [self.to_draft[token]]
            if token == self.eos:
                stop = "eos"
                break
            if keep_drafting is not None and len(tokens) < k:
                confidence = torch.softmax(logits, -1)[token] if config.greedy else q_i[token]
                if not keep_drafting(float(confidence)):
                    stop = "threshold"
                    break
        device = cache_device(self.model)
        q = torch.stack(rows) if rows else torch.zeros((0, self.vocab), device=device)
        return Proposal(tokens, q, stop)

    def next_q(self, ids, config):
        d_ids = self.draft_ids(ids)
        with torch.inference_mode():
            logits = forward(self.model, d_ids, DynamicCache(), self.draft_vocab, keep=1)[0]
        restricted = self._restricted(logits)
        return torch.softmax(restricted, -1).double(), warp(restricted, config).double()

    def measure_ms(self, ids, n_tokens) -> float:
        return measure_ms_per_token(self.model, self.draft_ids(ids), n_tokens, self.draft_vocab)


def _build(params, pair) -> TliDrafter:
    if pair.draft is None:
        raise ValueError("the tli drafter needs a draft model: give --draft")
    draft_tok = pair.draft_tokenizer or pair.tokenizer
    try:
        return TliDrafter(pair.draft, draft_tok, pair.tokenizer, pair.draft_info,
                          pair.vocab_size, pair.eos_token_id)  # fmt: skip
    except VocabBridgeError as e:
        raise ValueError(str(e)) from None


SPEC = DrafterSpec(
    kind="tli",
    label="a draft with another tokenizer",
    tip="A draft model whose tokenizer differs drafts the tokens both vocabularies share "
    "(TLI, lossless at any temperature)",
    help="tli: a draft model with another tokenizer, restricted to the tokens both "
    "vocabularies share (--vocab-bridge tli)",
    needs_draft_model=True,
    params=(),
    build=_build,
    words=lambda params: "the draft model, on the tokens both vocabularies share",
)
