"""A draft model with its own tokenizer (core.drafters.bridge: tli, string_draft): it reads
the target's text as its own tokenizer cuts it, on a cache of its own.

Each round re-cuts the context and keeps the cached positions the new cut agrees with (BPE
may merge across the point where the text grew), so the cache always equals a fresh pass
over its ids; what the round drafts is fed on top and cut away by the next round's re-cut
where the target kept something else. A proposal records what the draft drafted as its own
tokenizer cut it and where those pieces fall among the target's tokens (`pieces`: the
round's draft_pieces, trace schema 1.8).
"""

from __future__ import annotations

from transformers import DynamicCache

from specviz.core.decoding.forward import forward, max_positions, measure_ms_per_token
from specviz.core.decoding.kv_cache import crop_to
from specviz.core.drafters.base import Drafter, cache_device
from specviz.core.trace.extras.pieces import DraftPieces
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

    def pieces(self, d_before: list[int], drafted: list[int], ids: list[int],
               tokens: list[int], one_to_one: bool = False) -> DraftPieces:  # fmt: skip
        """The round's draft_pieces: the draft's tokens `drafted` after its ids d_before,
        and the range of the target's `tokens` (proposed after ids) each one's text falls
        in; one_to_one: token i is piece i (TLI's, one string in both vocabularies)."""
        text = piece_texts(self.draft_tok, d_before, drafted)
        if one_to_one:
            target = [(i, i + 1) for i in range(len(drafted))]
        else:
            target = align(text, piece_texts(self.target_tok, ids, tokens))
        return DraftPieces(tuple(drafted), tuple(text), tuple((a, b) for a, b in target))


TAIL = 8  # context tokens decoded before new ones: a token's text reads as in its context


def piece_texts(tok, before: list[int], new: list[int]) -> list[str]:
    """The text each of `new` adds after `before` (decoded after the last TAIL of them):
    "" for a token that only starts a character (a byte of a UTF-8 sequence), whose text the
    token completing it then carries. Bytes that make no UTF-8 text read as the decoder's
    replacement characters, which two tokenizers may not place alike."""
    base = before[-TAIL:]
    done = tok.decode(base, clean_up_tokenization_spaces=False).rstrip("\ufffd")
    texts = []
    for i in range(1, len(new) + 1):
        text = tok.decode(base + new[:i], clean_up_tokenization_spaces=False)
        if i < len(new):  # a character still incomplete waits for the next token
            text = text.rstrip("\ufffd")
        if not text.startswith(done):  # a decoder that rewrites the text before
            text = done + tok.decode(new[i - 1 : i], clean_up_tokenization_spaces=False)
        texts.append(text[len(done) :])
        done = text
    return texts


def align(pieces: list[str], tokens: list[str]) -> list[tuple[int, int]]:
    """For each piece of one cut of a text, the range [start, end) of the tokens of another
    cut of it that cover the same characters as the smallest run of pieces around it whose
    ends meet the tokens' (one piece and one token where the cuts agree); an empty piece
    or token joins the one after it, unless the other cut has one there too. (n, n) for the
    pieces past the tokens' text. The ranges never go back."""
    spans: list[tuple[int, int]] = []
    piece_end = token_end = 0  # characters the pieces, the tokens grouped so far cover
    i = j = 0
    while i < len(pieces):
        if j >= len(tokens):
            spans.append((len(tokens), len(tokens)))
            i += 1
            continue
        first, start = j, i
        piece_end, token_end = piece_end + len(pieces[i]), token_end + len(tokens[j])
        i, j = i + 1, j + 1
        while piece_end != token_end:  # the smaller side takes its next one
            if piece_end < token_end and i < len(pieces):
                piece_end, i = piece_end + len(pieces[i]), i + 1
            elif piece_end > token_end and j < len(tokens):
                token_end, j = token_end + len(tokens[j]), j + 1
            else:
                break  # one side has run out
        spans.extend([(first, j)] * (i - start))
    return spans
