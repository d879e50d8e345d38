"""Text for the train-head tests: the project's shipped prompts and check-head's probe
answers, as paragraphs (no download; a few thousand tokens)."""

from __future__ import annotations

import json
from pathlib import Path

from specviz.core.drafters.eagle3.fit import PROBE
from specviz.core.models.builtin import resources_dir


def write_text(path: Path) -> Path:
    paragraphs = []
    for file in sorted((resources_dir() / "prompts").glob("*.jsonl")):
        for line in file.read_text(encoding="utf-8").splitlines():
            if line.strip():
                paragraphs += json.loads(line).get("turns", [])
    for question, answer in PROBE:
        paragraphs += [question, answer]
    path.write_text("\n\n".join(paragraphs * 2) + "\n", encoding="utf-8")
    return path


# A small schedule: a few steps of 4 sequences of 64 tokens.
FAST = ["--max-length", "64", "--batch", "4", "--lr", "1e-3", "--dtype", "float32",
        "--device", "cpu", "--threads", "1"]  # fmt: skip


def tiny_run(folder: Path, **overrides):
    """A train-head run prepared on builtin:tiny and a small text, nothing trained yet."""
    from specviz.core.training.config import TrainConfig
    from specviz.core.training.setup import prepare

    config = TrainConfig(target="builtin:tiny", out=str(folder / "out"),
                         data=(str(write_text(folder / "text.txt")),), max_length=64,
                         batch=4, dtype="float32", device="cpu", draft_vocab=512,
                         **overrides)  # fmt: skip
    return prepare(config, None, True, lambda m: None)
