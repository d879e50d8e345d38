"""Pairs whose tokenizers differ: the check that refuses one, and the shared vocabulary a
bridged draft drafts from (core.drafters.bridge.tli; core.drafters.bridge.string_draft only
refuses a draft that shares none).

A token is shared when both tokenizers have a (non-special) token of the same string: for
two byte-level BPE vocabularies ("Ġthe") the same bytes. The draft may propose only those;
verify() judges them as target tokens, so the output stays the target's (Timor et al.,
"Lossless speculative decoding for heterogeneous vocabularies", arXiv:2502.05202, TLI).
"""

from __future__ import annotations

# --vocab-bridge: tli, the draft restricted to the tokens both vocabularies share
# (core.drafters.bridge.tli); string, its greedy text re-tokenized
# (core.drafters.bridge.string_draft)
BRIDGES = ("tli", "string")


class VocabBridgeError(ValueError):
    """Two tokenizers that cannot be bridged (no token in common)."""


def same_vocabulary(target_tok, draft_tok) -> str | None:
    """None when both tokenizers map every token to the same id; else why not, in words."""
    t_vocab, d_vocab = target_tok.get_vocab(), draft_tok.get_vocab()
    if len(t_vocab) != len(d_vocab):
        return f"{len(t_vocab)} vs {len(d_vocab)} tokens"
    if t_vocab != d_vocab:
        differing = sorted(tok for tok in t_vocab if d_vocab.get(tok) != t_vocab[tok])[:3]
        return f"the same size ({len(t_vocab)}) but different token ids (e.g. {differing!r})"
    return None


def shared_ids(target_tok, draft_tok, target_vocab: int, draft_vocab: int):
    """(draft_ids, target_ids) long tensors [S]: the tokens with the same string in both
    vocabularies, special tokens left out, ids below each model's logits width, in draft id
    order. VocabBridgeError when there are none."""
    t_vocab = target_tok.get_vocab()
    special = set(target_tok.all_special_tokens) | set(draft_tok.all_special_tokens)
    pairs = sorted(
        (d_id, t_vocab[text])
        for text, d_id in draft_tok.get_vocab().items()
        if text in t_vocab and text not in special and d_id < draft_vocab
        and t_vocab[text] < target_vocab
    )  # fmt: skip
    if not pairs:
        raise VocabBridgeError(
            "the draft's tokenizer has no token in common with the target's: "
            "no vocabulary bridge can draft for this target"
        )
    import torch  # here, not at the top: the command line's parser reads BRIDGES

    d_ids, t_ids = zip(*pairs, strict=True)
    return torch.tensor(d_ids, dtype=torch.long), torch.tensor(t_ids, dtype=torch.long)
