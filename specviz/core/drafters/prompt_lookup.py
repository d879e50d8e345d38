"""Prompt lookup decoding (transformers' PromptLookupCandidateGenerator): no model, q one-hot.

With a one-hot q a drafted x is kept with probability min(1, p(x)/1) = p(x), and a rejection
resamples from norm(max(0, p - q)): p with x removed, renormalised, so the output still
follows the target's p.
"""

from __future__ import annotations

from typing import Any

import torch

from specviz.core.decoding.proposal import Proposal
from specviz.core.drafters.base import (
    Drafter,
    ms_per_call,
    one_hot,
    one_hot_next,
)
from specviz.core.trace.extras.copied import CopiedFrom
from specviz.core.trace.records import ModelInfo


class LookupDrafter(Drafter):
    """Prompt lookup decoding (transformers' PromptLookupCandidateGenerator): for n from
    ngram_max down to 1, find the first earlier occurrence of the context's last n tokens
    and propose the tokens that followed it; q is one-hot. No model, no cache."""

    kind = "lookup"

    def __init__(self, ngram_max: int, info: ModelInfo, vocab: int, eos: int | None):
        self.ngram_max, self.info, self.vocab, self.eos = ngram_max, info, vocab, eos
        self.device = torch.device(info.device)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "ngram_max": self.ngram_max}

    def find(self, ids: list[int], k: int) -> tuple[int, int] | None:
        """[start, end): the span to copy, at most k long, or None (no match)."""
        if k < 1:
            return None
        context = torch.tensor(ids, dtype=torch.long)  # [L]
        length = len(ids)
        for n in range(min(self.ngram_max, length - 1), 0, -1):
            windows = context.unfold(0, n, 1)  # [L - n + 1, n]
            starts = (windows == context[-n:]).all(dim=1).nonzero()[:, 0] + n
            for start in starts.tolist():  # earliest first, as transformers does
                if start < length:  # the suffix itself has nothing after it
                    return start, min(start + k, length)
        return None

    def propose(self, ids, k, config, generator, keep_drafting) -> Proposal:
        span = self.find(ids, k)
        if span is None:
            return Proposal.empty("no_match")
        tokens = ids[span[0] : span[1]]
        stop = "k" if len(tokens) == k else "no_match"  # the copy ran into the context's end
        if self.eos is not None and self.eos in tokens:
            tokens = tokens[: tokens.index(self.eos) + 1]
            span, stop = (span[0], span[0] + len(tokens)), "eos"
        q = one_hot(tokens, self.vocab, self.device)  # [k, V]
        return Proposal.chain(tokens, q, stop, {"copied_from": CopiedFrom(*span)})

    def next_q(self, ids, config):
        """One-hot at the token the lookup would copy first (raw and warped alike: nothing
        is drawn), None without a match."""
        span = self.find(ids, 1)
        if span is None:
            return None
        return one_hot_next(ids[span[0]], self.vocab)

    def measure_ms(self, ids: list[int], n_tokens: int) -> float:
        return ms_per_call(lambda: self.find(ids, 1), n_tokens)


def build(params, pair) -> LookupDrafter:
    ngram_max, target = params["ngram_max"], pair.target_info
    info = ModelInfo(
        name=f"prompt lookup (n-grams up to {ngram_max})",
        path="",
        vocab_size=pair.vocab_size,
        params=0,
        dtype=target.dtype,
        device=target.device,
    )
    return LookupDrafter(ngram_max, info, pair.vocab_size, pair.eos_token_id)
