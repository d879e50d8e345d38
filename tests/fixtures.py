"""Small model folders for tests, built from a config and a tokenizer trained in seconds."""

from __future__ import annotations

from pathlib import Path

import torch

CORPUS = [
    "In the beginning God created the heaven and the earth.",
    "And the earth was without form, and void; and darkness was upon the face of the deep.",
    "A fool and his money are soon parted. A penny saved is a penny earned.",
    "The quick brown fox jumps over the lazy dog while the cat sleeps in the sun.",
    "You will meet a tall dark stranger who will teach you speculative decoding.",
] * 20


def make_tokenizer(vocab_size: int = 320, corpus: list[str] = CORPUS):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )


def make_model(vocab: int, n_layer: int, n_embd: int, seed: int, eos: int):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=vocab, n_positions=256, n_embd=n_embd, n_layer=n_layer, n_head=2,
        bos_token_id=eos, eos_token_id=eos, pad_token_id=eos,
    )  # fmt: skip
    model = GPT2LMHeadModel(config)
    # Sharper logits than the default init, so acceptance and rejection both happen.
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
    return model


def make_pair_dirs(root: Path, tokenizer=None, seed: int = 0) -> tuple[Path, Path]:
    tokenizer = tokenizer or make_tokenizer()
    vocab = len(tokenizer)
    eos = tokenizer.eos_token_id
    dirs = []
    for name, layers, width, s in (("target", 2, 64, seed), ("draft", 1, 32, seed + 1)):
        folder = root / name
        make_model(vocab, layers, width, s, eos).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        dirs.append(folder)
    return dirs[0], dirs[1]
