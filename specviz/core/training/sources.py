"""Training text, read with bounds: plain text files, JSONL chats (`messages`, or ShareGPT's
`conversations`), Spec-Bench-style question files with answers, folders of token-id shards
(the chats a target wrote itself: scripts/head_data.py), the English text of an installed
Debian package (`debian:NAME`, core.training.corpora), each with an optional weight
(`--data a.txt:2,b.jsonl:1,debian:python3.11-doc:0.5`). train-head and the draft model's
distillation (scripts/distill_smollm2.py, scripts/head_data.py) read their data here.

A file is refused in one line (TrainError) when it is empty, not UTF-8 text (binary), holds
a line longer than MAX_LINE bytes, or, for a chat file, no assistant turn at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from specviz.core.training import corpora
from specviz.core.training.config import TrainError

# Bytes in one line at most: a chat row of a few hundred KB is long; one line of hundreds
# of MB is a corpus without newlines (or not text), refused before it is held in memory.
# SPECVIZ_TRAIN_MAX_LINE lowers it (the tests do).
MAX_LINE = 16 << 20
CHAT_SUFFIXES = (".jsonl", ".json")
ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
         "chatgpt": "assistant", "bing": "assistant", "bard": "assistant", "model": "assistant",
         "system": "system"}  # fmt: skip
# Licences of text these machines' registries install (resources/models/README.md).
KNOWN_LICENCES = (
    ("/usr/share/games/fortunes", "BSD (Debian fortunes, fortunes-min)"),
    ("bible", "public domain (King James Bible, Debian bible-kjv)"),
    ("/usr/share/doc/python3", "PSF licence (python3.11-doc)"),
    ("/usr/share/dictd", "see /usr/share/doc/dict-*/copyright (GPL or WordNet licence)"),
    ("resources/prompts", "specviz's own prompts (the project's licence)"),
)


@dataclass(frozen=True)
class Document:
    """One training document: plain text (`text`), a chat (`turns`, each (role, content),
    role user, assistant or system; the loss falls on the assistant's) or token ids already
    (`ids`, the loss from `start` on)."""

    text: str | None = None
    turns: tuple[tuple[str, str], ...] = ()
    ids: tuple[int, ...] = ()
    start: int = 0


@dataclass(frozen=True)
class Source:
    """A data file, its weight in the mix and what was read from it."""

    path: str
    weight: float
    kind: str  # "text" or "chat"
    documents: tuple[Document, ...]
    bytes: int
    skipped: int = 0  # rows without an assistant turn (questions without answers)
    meta: dict | None = None  # a shard folder's meta.json

    @property
    def licence(self) -> str:
        """What may be done with the text: a shard folder's own meta.json says (the target's
        text is under the target's licence), else the file's known place (licence_of)."""
        said = (self.meta or {}).get("licence")
        return said[:300] if isinstance(said, str) and said.strip() else licence_of(self.path)


def max_line() -> int:
    raw = os.environ.get("SPECVIZ_TRAIN_MAX_LINE", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else MAX_LINE


def licence_of(path: str) -> str:
    if corpora.is_spec(path):
        return corpora.licence(path)
    resolved = str(Path(path).resolve())
    for part, licence in KNOWN_LICENCES:
        if part in resolved:
            return licence
    return "not known: check the text's licence before publishing the head"


def parse_specs(specs: tuple[str, ...] | list[str]) -> list[tuple[str, float]]:
    """[(path, weight)] of `--data` values, each "PATH[:WEIGHT]" or a comma-separated list."""
    out = []
    for spec in specs:
        for part in (p.strip() for p in spec.split(",")):
            if not part:
                continue
            path, weight = part, 1.0
            if m := re.fullmatch(r"(.+):(\d+(?:\.\d+)?|\.\d+)", part):
                path, weight = m.group(1), float(m.group(2))
            if weight <= 0 or weight > 1000:
                raise TrainError(f"--data {part}: a weight must be in (0, 1000]")
            out.append((path, weight))
    if not out:
        raise TrainError("--data names no file")
    return out


def read_lines(path: Path) -> list[str]:
    """The file's lines, decoded; TrainError when it is missing, binary or a line too long."""
    limit, lines = max_line(), []
    try:
        with path.open("rb") as f:
            number = 0
            while line := f.readline(limit + 1):
                number += 1
                if len(line) > limit:
                    raise TrainError(
                        f"{path}: line {number} is longer than {limit:,} bytes "
                        "(one line of a whole corpus? split it into lines)"
                    )
                if b"\0" in line:
                    raise TrainError(f"{path}: line {number} holds a NUL byte: not a text file")
                try:
                    lines.append(line.decode("utf-8"))
                except UnicodeDecodeError:
                    raise TrainError(f"{path}: line {number} is not UTF-8 text "
                                     "(a binary file?)") from None  # fmt: skip
    except IsADirectoryError:
        raise TrainError(f"{path} is a folder: name the files in it") from None
    except FileNotFoundError:
        raise TrainError(f"{path}: no such file") from None
    except OSError as e:
        raise TrainError(f"cannot read {path}: {e.strerror or e}") from None
    if not any(line.strip() for line in lines):
        raise TrainError(f"{path} is empty: no text to train on")
    return lines


def text_documents(lines: list[str]) -> list[Document]:
    """Paragraphs (blocks between blank lines) of a plain text file."""
    docs, block = [], []
    for line in [*lines, "\n"]:
        if line.strip():
            block.append(line)
        elif block:
            docs.append(Document(text="".join(block).strip("\n")))
            block = []
    return docs


def _turns(row: dict) -> list[tuple[str, str]] | None:
    """A JSON row's turns, or None when it is no chat."""
    if isinstance(row.get("messages"), list):
        items = [(m.get("role"), m.get("content")) for m in row["messages"] if isinstance(m, dict)]
    elif isinstance(row.get("conversations"), list):
        items = [(m.get("from") or m.get("role"), m.get("value") or m.get("content"))
                 for m in row["conversations"] if isinstance(m, dict)]  # fmt: skip
    elif isinstance(row.get("turns"), list):  # Spec-Bench: questions, answers if present
        answers = row.get("answers") or row.get("reference") or []
        choices = row.get("choices")
        if not answers and isinstance(choices, list) and choices and isinstance(choices[0], dict):
            answers = choices[0].get("turns") or []
        items = []
        for i, question in enumerate(row["turns"]):
            items.append(("user", question))
            if i < len(answers):
                items.append(("assistant", answers[i]))
    else:
        return None
    turns = []
    for role, content in items:
        role = ROLES.get(str(role).lower())
        if role and isinstance(content, str) and content.strip():
            turns.append((role, content))
    return turns


def chat_documents(path: Path, lines: list[str]) -> tuple[list[Document], int]:
    """(chats with an assistant turn, rows skipped) of a JSONL file; a row {"text": ...} is
    plain text."""
    docs, skipped = [], 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise TrainError(f"{path}: line {number} is not JSON ({e})") from None
        if not isinstance(row, dict):
            raise TrainError(f"{path}: line {number} is not a JSON object")
        if isinstance(row.get("text"), str) and _turns(row) is None:
            if row["text"].strip():
                docs.append(Document(text=row["text"]))
            continue
        turns = _turns(row)
        if turns is None:
            raise TrainError(f"{path}: line {number} has no messages, conversations, turns "
                             "or text field")  # fmt: skip
        if any(role == "assistant" for role, _ in turns):
            docs.append(Document(turns=tuple(turns)))
        else:
            skipped += 1
    if not docs:
        raise TrainError(f"{path}: no assistant turns in {skipped} chats (questions without "
                         "answers: give their answers, or plain text)")  # fmt: skip
    return docs, skipped


SHARDS = "specviz.token-shards/1"


def tokenizer_sha(tokenizer) -> str:
    """A fingerprint of a tokenizer's vocabulary: token-id shards name the one they use."""
    items = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()[:16]


def write_id_shard(path: Path, seqs: list[tuple[list[int], int]]) -> None:
    """Sequences (ids, where the loss starts) as one safetensors file of int32 ids and their
    offsets (4 bytes a token: 10M tokens in 40 MB), written atomically."""
    import torch
    from safetensors.torch import save_file

    flat = [t for ids, _ in seqs for t in ids]
    offsets = [0]
    for ids, _ in seqs:
        offsets.append(offsets[-1] + len(ids))
    tensors = {"ids": torch.tensor(flat, dtype=torch.int32),
               "offsets": torch.tensor(offsets, dtype=torch.int64),
               "starts": torch.tensor([s for _, s in seqs], dtype=torch.int32)}  # fmt: skip
    tmp = path.with_name(f".{path.name}.tmp")
    save_file(tensors, str(tmp), metadata={"format": SHARDS})
    os.replace(tmp, path)


def read_id_shards(folder: Path) -> tuple[dict, list[Document]]:
    """(meta, documents) of a folder of token-id shards (meta.json, shard-*.safetensors)."""
    from safetensors.torch import load_file

    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TrainError(f"{folder}: no readable meta.json of token-id shards ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != SHARDS:
        raise TrainError(f"{folder}: meta.json is not {SHARDS}")
    docs = []
    for path in sorted(folder.glob("shard-*.safetensors")):
        try:
            t = load_file(str(path))
            ids, offsets, starts = t["ids"].tolist(), t["offsets"].tolist(), t["starts"].tolist()
        except Exception as e:  # noqa: BLE001 - any fault of the file is the user's to fix
            raise TrainError(f"{path}: not a token-id shard ({type(e).__name__})") from None
        for i, start in enumerate(starts):
            docs.append(Document(ids=tuple(ids[offsets[i] : offsets[i + 1]]), start=start))
    if not docs:
        raise TrainError(f"{folder}: no shard-*.safetensors with sequences in it")
    return meta, docs


def read_source(path: str, weight: float = 1.0) -> Source:
    """One data file (or shard folder, or debian:NAME), read and checked (TrainError)."""
    if corpora.is_spec(path):
        texts = corpora.package_texts(path)
        size = sum(len(t.encode("utf-8")) for t in texts)
        return Source(path, weight, "text", tuple(Document(text=t) for t in texts), size)
    file = Path(path).expanduser()
    if file.is_dir() and (file / "meta.json").exists():
        meta, docs = read_id_shards(file)
        size = sum(p.stat().st_size for p in file.glob("shard-*.safetensors"))
        return Source(path, weight, "ids", tuple(docs), size, meta=meta)
    lines = read_lines(file)
    size = sum(len(line.encode("utf-8")) for line in lines)
    if file.suffix.lower() in CHAT_SUFFIXES:
        docs, skipped = chat_documents(file, lines)
        kind = "chat" if any(d.turns for d in docs) else "text"
        return Source(path, weight, kind, tuple(docs), size, skipped)
    return Source(path, weight, "text", tuple(text_documents(lines)), size)


def read_sources(specs: tuple[str, ...] | list[str]) -> list[Source]:
    return [read_source(path, weight) for path, weight in parse_specs(specs)]
