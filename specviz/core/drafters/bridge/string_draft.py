"""A draft model whose tokenizer differs, bridged by strings (transformers' universal
assisted generation; Timor et al., arXiv:2502.05202, section on string-level exact match).

The draft reads the target's text as its own tokenizer cuts it (core.drafters.bridge.recut), drafts
greedily in its own vocabulary, and its new text, re-tokenized by the target's tokenizer, is
the proposal. Drafted greedily, the proposal is a function of the context, so its q is
one-hot, as prompt lookup's: a token x is kept with probability p(x) and a rejection draws
from p without x, which is exact at every temperature and under every rule (the draft's own
probabilities never reach verify()). Unlike TLI it can propose any target token, and a
draft token may become several target tokens or part of one.
"""

from __future__ import annotations

import torch

from specviz.core.decoding.proposal import Proposal
from specviz.core.drafters.base import one_hot, one_hot_next
from specviz.core.drafters.bridge.recut import RecutDraft
from specviz.core.models.vocab_bridge import VocabBridgeError, shared_ids


class StringDrafter(RecutDraft):
    """A draft model with its own tokenizer, its greedy text re-cut for the target."""

    kind = "string"

    def describe(self):
        return {"kind": self.kind, "target_vocab": self.vocab, "draft_vocab": self.draft_vocab}

    def _draft_text(self, feed: list[int], k: int, keep_drafting) -> tuple[list[int], str, str]:
        """Up to k greedy draft tokens on the cache after `feed`: (the tokens, their text,
        why it stopped). The draft's end-of-text ends it (as "eos": the text stops there)."""
        start = self.cached + feed  # the context's cut, as the cache will hold it
        drafted: list[int] = []
        stop = "k"
        for _ in range(k):
            logits = self.step(feed)
            token = int(torch.argmax(logits))
            if token == self.draft_tok.eos_token_id:
                stop = "eos"
                break
            drafted.append(token)
            feed = [token]
            if keep_drafting is not None and len(drafted) < k:
                if not keep_drafting(float(torch.softmax(logits.float(), -1)[token])):
                    stop = "threshold"
                    break
        before = self.draft_tok.decode(start, clean_up_tokenization_spaces=False)
        after = self.draft_tok.decode(start + drafted, clean_up_tokenization_spaces=False)
        return drafted, after[len(before) :] if after.startswith(before) else "", stop

    def _target_tokens(self, ids: list[int], new_text: str) -> list[int]:
        """new_text as the target's tokens after ids: the tokens the target's cut of the
        whole text adds after its cut of the context, or new_text cut alone where the two
        cuts part inside the context."""
        if not new_text:
            return []
        context = self.text(ids)
        cut = self.target_tok.encode(context, add_special_tokens=False)
        whole = self.target_tok.encode(context + new_text, add_special_tokens=False)
        if whole[: len(cut)] == cut:
            return whole[len(cut) :]
        return self.target_tok.encode(new_text, add_special_tokens=False)

    def propose(self, ids, k, config, generator, keep_drafting) -> Proposal:
        feed = self.catch_up(self.draft_ids(ids))
        start = self.cached + feed  # the draft's cut of the context
        drafted, new_text, stop = self._draft_text(feed, k, keep_drafting)
        tokens = [t for t in self._target_tokens(ids, new_text) if t < self.vocab][:k]
        if stop == "eos" and len(tokens) < k and self.eos is not None:
            tokens.append(self.eos)  # the draft ended its text: so may the target
        elif len(tokens) == k:
            stop = "k"
        pieces = self.pieces(start, drafted, ids, tokens)
        q = one_hot(tokens, self.vocab, self.device)
        return Proposal.chain(tokens, q, stop, {"draft_pieces": pieces})

    def next_q(self, ids, config):
        with torch.inference_mode():
            token = int(torch.argmax(self.fresh_logits(ids)))
        if token == self.draft_tok.eos_token_id:
            return None if self.eos is None else one_hot_next(self.eos, self.vocab)
        d_ids = self.draft_ids(ids)
        before = self.draft_tok.decode(d_ids, clean_up_tokenization_spaces=False)
        after = self.draft_tok.decode(d_ids + [token], clean_up_tokenization_spaces=False)
        new = after[len(before) :] if after.startswith(before) else ""
        tokens = [t for t in self._target_tokens(ids, new) if t < self.vocab]
        return one_hot_next(tokens[0], self.vocab) if tokens else None


def build(params, pair) -> StringDrafter:
    if pair.draft is None:
        raise ValueError("the string drafter needs a draft model: give --draft")
    draft_tok = pair.draft_tokenizer or pair.tokenizer
    drafter = StringDrafter(pair.draft, draft_tok, pair.tokenizer, pair.draft_info,
                            pair.vocab_size, pair.eos_token_id)  # fmt: skip
    try:  # not one token string in common, not even a character: another alphabet, whose
        # text the target never writes (its cut of the target's text is all unknown tokens)
        shared_ids(pair.tokenizer, draft_tok, pair.vocab_size, drafter.draft_vocab)
    except VocabBridgeError as e:
        raise ValueError(str(e)) from None
    return drafter
