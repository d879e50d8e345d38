#!/usr/bin/env python
"""The target's own chats, Magpie-style, as token-id shards: a data source of
`specviz train-head --data FOLDER` (and of scripts/distill_smollm2.py --chat).

smollm2 (an instruct target) writes chats Magpie-style (Xu et al., arXiv:2406.08464): it is
given its own chat template up to the user turn and continues it at temperature 1 (half the
turns with an opening word drawn from STARTERS, so that every Spec-Bench category shows up),
then answers each turn itself, greedy or sampled, in large batches. tiny (a text model)
continues openings of its corpus' held-in lines. Nothing is downloaded.

A share of the chat turns (`--passage-share`) quote a passage: an answer the target wrote
in an earlier shard, to summarise, or followed by a question the target writes itself about
it (Spec-Bench's summarisation and RAG groups, where a drafter copies from a long context).

Each shard (shard-NNNN.safetensors, core.training.sources.write_id_shard) holds the token ids
of its chats and where each answer starts: 4 bytes a token, no hidden states (train-head
computes the target's states and soft labels online from a prefill). Shards are written
atomically and counted on restart, so an interrupted run resumes where it stopped.

    python scripts/head_data.py --pair smollm2 --out /tmp/chat --shards 40
    specviz train-head --target builtin:smollm2 --data /tmp/chat --out /tmp/head
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from specviz.core.models.builtin import get_pair  # noqa: E402
from specviz.core.training.sources import SHARDS, tokenizer_sha, write_id_shard  # noqa: E402

# Opening words for half the user turns, so that the target's own prompts cover writing,
# translation, summarisation, question answering, maths and reading a passage (Spec-Bench's
# six groups); the target writes the rest of the turn.
STARTERS = (
    "Write a short story about",
    "Write a poem about",
    "Write an email to",
    "Write a",
    "Translate the following sentence into French:",
    "Translate into Spanish:",
    "Translate this to German:",
    "Summarize the following text:",
    "Summarize this article:",
    "Give me a summary of",
    "What is",
    "What are",
    "Who was",
    "Where is",
    "When did",
    "Why do",
    "Why is",
    "How do I",
    "How does",
    "How can I",
    "Explain",
    "Explain why",
    "Describe",
    "Can you help me",
    "Can you explain",
    "List five",
    "Give me three tips for",
    "What are the benefits of",
    "Compare",
    "Solve",
    "Calculate",
    "If a train travels",
    "A store sells",
    "What is the sum of",
    "Read the passage and answer the question.",
    "Based on the following information,",
    "Here is a paragraph:",
    "Tell me about",
    "I need advice on",
    "Please rewrite this sentence:",
    "Generate a list of",
)


def log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def load_target(pair: str, dtype: str, device: str = "cpu"):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target_dir, _ = get_pair(pair).resolve(log)
    tok = AutoTokenizer.from_pretrained(target_dir)
    model = AutoModelForCausalLM.from_pretrained(target_dir, dtype=getattr(torch, dtype))
    return model.to(device).eval(), tok, target_dir


# ---------------------------------------------------------------------------- prompts


def magpie_turns(model, tok, n: int, rng: random.Random, gen: torch.Generator) -> list[str]:
    """n user turns the target writes after its own template's user header."""
    header = tok.apply_chat_template([{"role": "user", "content": "X"}], tokenize=False)
    header = header[: header.index("X")]  # system turn + "<|im_start|>user\n"
    starts = [rng.choice(STARTERS) + " " if rng.random() < 0.5 else "" for _ in range(n)]
    rows = [tok(header + s, add_special_tokens=False)["input_ids"] for s in starts]
    out = sample_batch(model, tok, rows, 64, temperature=1.0, gen=gen)
    turns = []
    for s, ids in zip(starts, out, strict=True):
        text = (s + tok.decode(ids, skip_special_tokens=True)).strip()
        turns.append(text)
    return turns


# Turns that quote a passage; "{p}" is the passage. Those ending in "Question:" are
# continued by the target (it writes the question), the others are used as they stand.
PASSAGE_TURNS = (
    "Summarize the following text: {p}",
    "Summarize this in two sentences: {p}",
    "Summarize this article: {p}",
    "Give me a short summary of this: {p}",
    "Read the passage and answer the question. Passage: {p} Question:",
    "Based on the following information, answer the question. Information: {p} Question:",
    "Here is a paragraph: {p} Question:",
    "{p}\n\nBased on the text above, answer this question:",
)


def passage_turns(model, tok, n, passages, rng, gen) -> list[str]:
    """n user turns quoting passages; the question-style ones finished by the target."""
    turns = []
    for _ in range(n):
        text = rng.choice(passages)
        sentences = re.split(r"(?<=[.!?])\s+", text)
        cut = " ".join(sentences[: rng.randint(2, 8)])
        turns.append(rng.choice(PASSAGE_TURNS).format(p=cut))
    asks = [i for i, t in enumerate(turns) if t.endswith(":") and not t.startswith("Summ")
            and not t.startswith("Give")]  # fmt: skip
    if asks:
        header = tok.apply_chat_template([{"role": "user", "content": "X"}], tokenize=False)
        header = header[: header.index("X")]
        rows = [tok(header + turns[i] + " ", add_special_tokens=False)["input_ids"]
                for i in asks]  # fmt: skip
        for i, ids in zip(asks, sample_batch(model, tok, rows, 32, 1.0, gen), strict=True):
            question = tok.decode(ids, skip_special_tokens=True).split("\n")[0].strip()
            turns[i] = f"{turns[i]} {question}" if len(question) >= 8 else ""
    return [t for t in turns if t]


def answer_texts(tok, shard: list[dict]) -> list[str]:
    """The greedy answers of a shard, as passages for later turns."""
    out = []
    for s in shard:
        if s["greedy"]:
            text = tok.decode(s["ids"][s["start"] :], skip_special_tokens=True)
            text = " ".join(text.split())
            if 200 <= len(text) and "```" not in text:
                out.append(text)
    return out


def usable(turn: str) -> bool:
    return 12 <= len(turn) <= 400 and len(turn.split()) >= 3 and "<|" not in turn


def corpus_prompts() -> list[str]:
    """tiny's prompt sources: KJV verses and fortunes (Debian packages, read through
    specviz.core.training.corpora as train-head's --data debian:NAME reads them)."""
    from specviz.core.training.config import TrainError
    from specviz.core.training.corpora import package_texts

    try:
        chapters = package_texts("debian:bible-kjv-text")
        fortunes = package_texts("debian:fortunes-min", "debian:fortunes")
    except TrainError as e:
        raise SystemExit(f"{e}\napt-get install bible-kjv bible-kjv-text fortunes "
                         "fortunes-min") from None  # fmt: skip
    verses = [verse for chapter in chapters for verse in chapter.split("\n")]
    return verses + [" ".join(e.split()) for e in fortunes]


# -------------------------------------------------------------------------- generation


# A finished row stays in the batch (its tokens unread) until this share of the rows has
# finished; then they leave together, their cache rows with them (one copy of the cache).
FINISHED_SHARE = 1 / 8


def reserved_layer(capacity: int):
    """A transformers DynamicLayer whose keys and values are the first positions of buffers
    reserved for `capacity` positions: a step writes its own column, where DynamicLayer's
    torch.cat copied the whole cache (at batch 128, into freshly faulted-in memory, most of a
    step's time)."""
    from transformers.cache_utils import DynamicLayer

    class ReservedLayer(DynamicLayer):
        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                b, h, _, d = key_states.shape
                self.k_buf = key_states.new_empty(b, h, capacity, d)
                self.v_buf = value_states.new_empty(b, h, capacity, value_states.shape[-1])
                self.length = 0
            end = self.length + key_states.shape[-2]
            if end > capacity:
                raise ValueError(f"the cache holds {capacity} positions, not {end}")
            self.k_buf[:, :, self.length : end] = key_states
            self.v_buf[:, :, self.length : end] = value_states
            self.length = end
            self.keys, self.values = self.k_buf[:, :, :end], self.v_buf[:, :, :end]
            return self.keys, self.values

        def batch_select_indices(self, indices):
            if self.is_initialized:
                self.k_buf, self.v_buf = self.k_buf[indices], self.v_buf[indices]
                self.keys = self.k_buf[:, :, : self.length]
                self.values = self.v_buf[:, :, : self.length]

    return ReservedLayer


@torch.inference_mode()
def sample_batch(model, tok, rows, max_new: int, temperature: float, gen) -> list[list[int]]:
    """Continue each row (left-padded into one batch) up to an end token or max_new; the
    new tokens of each row, the end token included. temperature 0: greedy. The cache is
    reserved once for the longest row; finished rows leave the batch (their cache rows with
    them) an eighth of the batch at a time, so the last long answers do not carry the
    finished ones through every step."""
    from transformers import Cache

    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    device = model.device
    stops = torch.tensor(sorted({tok.eos_token_id, pad}), device=device)
    width = max(map(len, rows))
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=device)  # [B, P]
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=device)
    layer = reserved_layer(width + max_new)
    cache = Cache(layers=[layer() for _ in range(model.config.num_hidden_layers)])
    position = (mask.cumsum(1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=position, cache=cache,
                   use_cache=True, logits_to_keep=1).logits[:, -1]  # fmt: skip
    out: list[list[int]] = [[] for _ in rows]
    alive = list(range(len(rows)))  # the original row of each batch row; -1: finished
    for _ in range(max_new):
        if temperature > 0:
            probs = torch.softmax(logits.float() / temperature, -1)
            nxt = torch.multinomial(probs, 1, generator=gen)[:, 0]
        else:
            nxt = logits.argmax(-1)
        ending = torch.isin(nxt, stops).tolist()
        for i, (token, ends) in enumerate(zip(nxt.tolist(), ending, strict=True)):
            if alive[i] >= 0:
                out[alive[i]].append(token)
                alive[i] = -1 if ends else alive[i]
        finished = alive.count(-1)
        if finished == len(alive):
            break
        if finished >= FINISHED_SHARE * len(alive):
            keep = [i for i, row in enumerate(alive) if row >= 0]
            index = torch.tensor(keep, device=device)
            cache.batch_select_indices(index)
            alive = [alive[i] for i in keep]
            nxt, mask, position = nxt[index], mask[index], position[index]
        mask = torch.cat([mask, mask.new_ones(len(alive), 1)], 1)
        position = position[:, -1:] + 1
        logits = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=position,
                       cache=cache, use_cache=True).logits[:, -1]  # fmt: skip
    return out


def make_shard(model, tok, args, index: int, pool, passages) -> list[dict]:
    rng = random.Random(index * 7919 + args.seed)
    gen = torch.Generator(args.device).manual_seed(index * 104729 + args.seed)
    chat = tok.chat_template is not None and args.pair != "tiny"
    if chat:
        quoting = round(args.batch * args.passage_share) if len(passages) >= 20 else 0
        turns = [t for t in magpie_turns(model, tok, args.batch - quoting, rng, gen)
                 if usable(t)]  # fmt: skip
        turns += passage_turns(model, tok, quoting, passages, rng, gen)
        texts = [tok.apply_chat_template([{"role": "user", "content": t}], tokenize=False,
                                         add_generation_prompt=True) for t in turns]  # fmt: skip
        rows = [tok(text, add_special_tokens=False)["input_ids"] for text in texts]
    else:
        turns = [rng.choice(pool) for _ in range(args.batch)]
        rows = []
        for t in turns:
            ids = tok(t)["input_ids"]
            rows.append(ids[: rng.randint(4, max(4, min(len(ids), 24)))])
    greedy = rng.random() < args.greedy_share
    answers = sample_batch(model, tok, rows, args.max_new, 0.0 if greedy else 1.0, gen)
    shard = []
    for row, answer in zip(rows, answers, strict=True):
        if len(answer) < 4:
            continue
        shard.append({"ids": row + answer, "start": len(row), "greedy": greedy})
    return shard


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", default="smollm2", choices=("smollm2", "tiny"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shards", type=int, default=40, help="shards in all (resumes)")
    # Greedy decoding with a KV cache gains with the batch on a 2-core CPU (smollm2 bf16, new
    # tokens/s: 23 at 1, 175 at 16, 271 at 64, 321 at 128; FACTS, turn 5): the widest wins.
    ap.add_argument("--batch", type=int, default=128, help="sequences per shard")
    ap.add_argument("--max-new", type=int, default=160, help="answer tokens at most")
    ap.add_argument("--greedy-share", type=float, default=0.75, help="shards answered greedy")
    ap.add_argument("--passage-share", type=float, default=0.0,
                    help="share of chat turns quoting an earlier answer")  # fmt: skip
    ap.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda on a machine with a GPU")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok, target_dir = load_target(args.pair, args.dtype, args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"format": SHARDS, "pair": args.pair, "target": f"builtin:{args.pair}",
            "tokenizer_sha": tokenizer_sha(tok), "vocab_size": len(tok), "dtype": args.dtype,
            "max_new": args.max_new, "batch": args.batch, "greedy_share": args.greedy_share,
            "seed": args.seed, "passage_share": args.passage_share,
            "licence": "the target's own text (its licence: the target's)"}  # fmt: skip
    (args.out / "meta.json").write_text(json.dumps(meta, indent=1))
    pool = corpus_prompts() if args.pair == "tiny" else []
    passages_file = args.out / "passages.jsonl"  # greedy answers so far, one JSON string a line
    passages = ([json.loads(line) for line in passages_file.read_text().splitlines()]
                if passages_file.exists() else [])  # fmt: skip
    t0 = time.perf_counter()
    for index in range(args.shards):
        path = args.out / f"shard-{index:04d}.safetensors"
        if path.exists():
            continue
        shard = make_shard(model, tok, args, index, pool, passages)
        write_id_shard(path, [(s["ids"], s["start"]) for s in shard])
        if args.pair != "tiny":
            fresh = answer_texts(tok, shard)
            passages += fresh
            with passages_file.open("a") as f:
                f.writelines(json.dumps(t) + "\n" for t in fresh)
        tokens = sum(len(s["ids"]) - s["start"] for s in shard)
        log(f"shard {index + 1}/{args.shards}: {len(shard)} sequences, {tokens} answer "
            f"tokens, {time.perf_counter() - t0:.0f}s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
