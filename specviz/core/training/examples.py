"""Documents as token sequences with a loss mask, the draft vocabulary, the held-out split
and the batch stream.

Chats are rendered in the target's chat template when it has one and the loss falls on the
assistant's turns; without a template a chat is written as "User: ... Assistant: ..." plain
text. Plain text is tokenized paragraph after paragraph (an end token between) and cut into
windows of max_length tokens, every token trained.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from specviz.core.training.config import TrainError
from specviz.core.training.sources import Document, Source, tokenizer_sha

MAX_EVAL = 64  # held-out sequences at most (a measurement runs the target over them)


@dataclass(frozen=True)
class Example:
    """A sequence: ids, and which tokens the loss falls on (mask[j]: predicting ids[j])."""

    ids: tuple[int, ...]
    mask: tuple[bool, ...]
    source: int  # index of its Source

    @property
    def trained(self) -> int:
        return sum(self.mask)


def has_template(tokenizer) -> bool:
    template = getattr(tokenizer, "chat_template", None)
    return bool(template) if not isinstance(template, dict) else bool(template)


def _chat_text(tokenizer, turns, templated: bool) -> tuple[str, list[tuple[int, int]]]:
    """(the chat as text, the character spans of the assistant's turns)."""
    if templated:
        messages = [{"role": r, "content": c} for r, c in turns]
        try:
            text = tokenizer.apply_chat_template(messages, tokenize=False)
        except Exception as e:  # noqa: BLE001 - a template is code from the model's folder
            raise TrainError(f"the target's chat template failed on a chat: {e}") from None
    else:
        names = {"user": "User", "assistant": "Assistant", "system": "System"}
        text = "".join(f"{names[r]}: {c}\n\n" for r, c in turns)
    spans, at = [], 0
    for role, content in turns:
        start = text.find(content, at)
        if start < 0:  # the template rewrote the turn (stripped it): find its stripped text
            start = text.find(content.strip(), at)
            content = content.strip()
        if start < 0:
            continue
        at = start + len(content)
        if role == "assistant":
            spans.append((start, at))
    return text, spans


def encode_chat(tokenizer, doc: Document, templated: bool, max_length: int, source: int):
    """The chat as an Example (cut to max_length), or None when no assistant token is left."""
    text, spans = _chat_text(tokenizer, doc.turns, templated)
    try:
        enc = tokenizer(text, add_special_tokens=not templated, return_offsets_mapping=True)
        offsets = enc["offset_mapping"]
    except (NotImplementedError, ValueError):  # a slow tokenizer: every token trained
        enc = tokenizer(text, add_special_tokens=not templated)
        offsets = None
    ids = list(enc["input_ids"])[:max_length]
    if offsets is None:
        mask = [True] * len(ids)
    else:  # a token is trained when it starts inside an assistant turn
        mask = [any(a <= s < b for a, b in spans) for s, _ in offsets[: len(ids)]]
    if len(ids) < 3 or not any(mask[1:]):
        return None
    return Example(tuple(ids), tuple(mask), source)


def encode_text(tokenizer, docs, max_length: int, source: int) -> list[Example]:
    """Paragraphs joined by the end token and cut into windows of max_length tokens."""
    eos = tokenizer.eos_token_id
    stream: list[int] = []
    for doc in docs:
        stream += list(tokenizer(doc.text, add_special_tokens=False, verbose=False)["input_ids"])
        if eos is not None:
            stream.append(eos)
    out = []
    for start in range(0, len(stream), max_length):
        window = stream[start : start + max_length]
        if len(window) >= 8:
            out.append(Example(tuple(window), (True,) * len(window), source))
    return out


def encode_sources(tokenizer, sources: list[Source], max_length: int, say) -> list[Example]:
    """Every source's examples; `say` is told once when chats are written as plain text."""
    templated = has_template(tokenizer)
    if not templated and any(s.kind == "chat" for s in sources):
        say("the target has no chat template: chats are written as plain 'User: ... "
            "Assistant: ...' text, the loss on the assistant's turns")  # fmt: skip
    examples: list[Example] = []
    for index, source in enumerate(sources):
        if source.meta is not None and source.meta.get("tokenizer_sha") != tokenizer_sha(tokenizer):
            raise TrainError(f"{source.path}: its token ids were written with another "
                             f"tokenizer ({source.meta.get('target')})")  # fmt: skip
        texts = [d for d in source.documents if d.text is not None]
        found = encode_text(tokenizer, texts, max_length, index) if texts else []
        for doc in source.documents:
            ids = doc.ids[:max_length]
            if len(ids) >= 3 and doc.start < len(ids):
                mask = tuple(j >= doc.start for j in range(len(ids)))
                found.append(Example(ids, mask, index))
        for doc in source.documents:
            if doc.turns and (ex := encode_chat(tokenizer, doc, templated, max_length, index)):
                found.append(ex)
        if not found:
            raise TrainError(f"{source.path}: too little text (no sequence of 8 tokens)")
        examples += found
    return examples


def split_heldout(examples: list[Example]) -> tuple[list[Example], list[Example]]:
    """(train, held out): every k-th sequence held out, 5% and at most MAX_EVAL of them."""
    if len(examples) < 2:
        raise TrainError(f"too little text: {len(examples)} sequence; give more text, a "
                         "smaller --max-length or --eval-data")  # fmt: skip
    count = max(1, min(MAX_EVAL, round(0.05 * len(examples))))
    step = len(examples) / count
    held = {int(i * step + step / 2) for i in range(count)}
    return ([e for i, e in enumerate(examples) if i not in held],
            [e for i, e in enumerate(examples) if i in held])  # fmt: skip


def draft_vocabulary(examples, size: int, vocab: int, always: tuple[int, ...]) -> list[int]:
    """The `size` most frequent trained ids of the examples (ids in `always` kept), sorted;
    every id when size >= vocab (d2t then maps each id to itself)."""
    if size >= vocab:
        return list(range(vocab))
    counts = Counter()
    for ex in examples:
        counts.update(t for t, m in zip(ex.ids, ex.mask, strict=True) if m)
    chosen = dict.fromkeys(t for t in always if 0 <= t < vocab)
    for token, _ in counts.most_common():
        if len(chosen) >= size:
            break
        chosen.setdefault(token)
    for token in range(vocab):  # a small corpus: fill up with ids it never shows
        if len(chosen) >= size:
            break
        chosen.setdefault(token)
    return sorted(chosen)


def fingerprint(examples: list[Example], weights: list[float]) -> str:
    """A hash of the token ids, masks and weights: a resumed run checks its data by it."""
    h = hashlib.sha256(repr(weights).encode())
    for ex in examples:
        h.update(repr((ex.ids, ex.mask, ex.source)).encode())
    return h.hexdigest()[:16]


def epoch_order(examples: list[Example], weights: list[float], seed: int) -> list[Example]:
    """One epoch: each source's examples repeated by its weight (a fraction: that share of
    them, drawn), shuffled."""
    rng = random.Random(seed)
    order: list[Example] = []
    for index, weight in enumerate(weights):
        own = [e for e in examples if e.source == index]
        whole, part = int(weight), weight - int(weight)
        order += own * whole + rng.sample(own, round(part * len(own)))
    rng.shuffle(order)
    return order


def steps_per_epoch(examples, weights, batch: int) -> int:
    return max(1, math.ceil(len(epoch_order(examples, weights, 0)) / batch))


def batch_stream(examples, weights, batch: int, seed: int, start: int) -> Iterator[list[Example]]:
    """Batches of `batch` sequences from step `start` on, epoch after epoch (each epoch
    shuffled by seed + epoch): the same stream on every rank and in a resumed run."""

    def batches():
        for epoch in itertools.count():
            order = epoch_order(examples, weights, seed + epoch)
            for i in range(0, len(order), batch):
                yield order[i : i + batch]

    return itertools.islice(batches(), start, None)
