"""TLI: a draft model whose tokenizer differs from the target's (token-level intersection,
Timor et al., "Lossless speculative decoding for heterogeneous vocabularies",
arXiv:2502.05202; core.drafters.bridge.string_draft re-tokenizes the draft's text instead).

The draft reads the target's text as its own tokenizer cuts it (core.drafters.bridge.recut), and
draws each token from its distribution restricted to the tokens both vocabularies share
(core.models.vocab_bridge) and renormalised: the drafted token is the target token with the
same string, and q (that restricted distribution, placed at the target's ids) is what
verify() judges it by. verify() is exact for any q, so the output follows the target's p at
every temperature; the price is the target tokens the draft can never propose (the trace
header's `shared_tokens`).
"""

from __future__ import annotations

import torch

from specviz.core.decoding.proposal import Proposal
from specviz.core.decoding.warp import sample, warp
from specviz.core.drafters.bridge.recut import RecutDraft
from specviz.core.models.vocab_bridge import VocabBridgeError, shared_ids


class TliDrafter(RecutDraft):
    """A draft model with its own tokenizer and cache, drafting the shared tokens only."""

    kind = "tli"

    def __init__(self, model, draft_tok, target_tok, info, vocab: int, eos):
        super().__init__(model, draft_tok, target_tok, info, vocab, eos)
        d_ids, t_ids = shared_ids(target_tok, draft_tok, vocab, self.draft_vocab)
        self.d_ids, self.t_ids = d_ids.to(self.device), t_ids.to(self.device)
        # target id -> draft id
        self.to_draft = dict(zip(t_ids.tolist(), d_ids.tolist(), strict=True))

    def describe(self):
        return {"kind": self.kind, "shared_tokens": len(self.to_draft),
                "target_vocab": self.vocab, "draft_vocab": self.draft_vocab}  # fmt: skip

    def _fallback(self) -> int:
        bos = self.draft_tok.bos_token_id
        return bos if bos is not None else int(self.d_ids[0])

    def _restricted(self, logits: torch.Tensor) -> torch.Tensor:
        """The draft's logits [V_draft] placed at the shared tokens' target ids [V]; -inf
        elsewhere (probability 0 after warp)."""
        full = torch.full((self.vocab,), float("-inf"), device=logits.device)
        full[self.t_ids] = logits.float()[self.d_ids]
        return full

    def propose(self, ids, k, config, generator, keep_drafting) -> Proposal:
        feed = self.catch_up(self.draft_ids(ids))
        start = self.cached + feed  # the draft's cut of the context
        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        stop = "k"
        for _ in range(k):
            logits = self._restricted(self.step(feed))  # [V]
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
        pieces = self.pieces(start, [self.to_draft[t] for t in tokens], ids, tokens, True)
        return Proposal.chain(tokens, rows, stop, {"draft_pieces": pieces})

    def next_q(self, ids, config):
        with torch.inference_mode():
            restricted = self._restricted(self.fresh_logits(ids))
        return torch.softmax(restricted, -1).double(), warp(restricted, config).double()


def build(params, pair) -> TliDrafter:
    if pair.draft is None:
        raise ValueError("the tli drafter needs a draft model: give --draft")
    draft_tok = pair.draft_tokenizer or pair.tokenizer
    try:
        return TliDrafter(pair.draft, draft_tok, pair.tokenizer, pair.draft_info,
                          pair.vocab_size, pair.eos_token_id)  # fmt: skip
    except VocabBridgeError as e:
        raise ValueError(str(e)) from None
