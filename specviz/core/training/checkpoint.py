"""The checkpoint: the head's weights, the optimizer, the RunState (budget, data position,
curve), the TrainConfig, the draft vocabulary and what the run was for (the target, its
data). Every file is written to a temporary name and renamed over the old one, so a run
killed at any moment leaves the last complete checkpoint, never half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import torch

from specviz.core.training.config import RunState, TrainConfig, TrainError

CHECKPOINT = "checkpoint.pt"
FORMAT = "specviz.train-head/1"


def check_out(out: Path) -> None:
    """TrainError unless `out` is a folder this process can write in, or can be made one
    (nothing is created here: a run refused later leaves no folder behind)."""
    place = out
    while not place.exists() and place != place.parent:
        place = place.parent
    if not place.is_dir():
        raise TrainError(f"--out {out}: {place} is a file, not a folder")
    try:
        with tempfile.NamedTemporaryFile(dir=place, prefix=".write-probe-"):
            pass
    except OSError as e:
        raise TrainError(f"--out {out}: cannot write there ({e.strerror or e})") from None


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json(path: Path, obj: dict) -> None:
    write_atomic(path, (json.dumps(obj, indent=1) + "\n").encode())


def identity(teacher, target: str) -> dict:
    """What a checkpoint was trained for: the target's shapes and a fingerprint of its
    embeddings (rounded to bfloat16, so a float32 and a bfloat16 load agree)."""
    rows = teacher.embed[:64].to(torch.bfloat16).float().cpu().contiguous()
    return {
        "target": target,
        "vocab": int(teacher.weight.shape[0]),
        "hidden": teacher.hidden,
        "n_layers": teacher.n_layers,
        "embed_sha": hashlib.sha256(rows.numpy().tobytes()).hexdigest()[:16],
    }


def save(path: Path, head, optimizer, state: RunState, config: TrainConfig, ident: dict,
         draft_ids: list[int], data_sha: str, best: dict | None) -> None:  # fmt: skip
    """Write the checkpoint atomically (best: the best head's state dict so far, or None)."""
    blob = {
        "format": FORMAT,
        "state": state.to_json(),
        "config": config.to_json(),
        "identity": ident,
        "draft_ids": list(draft_ids),
        "data_sha": data_sha,
        "head": {k: v.detach().cpu() for k, v in head.state_dict().items()},
        "optimizer": optimizer.state_dict(),
        "best": best,
    }
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(blob, tmp)
    with tmp.open("rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load(path: Path) -> dict:
    """A checkpoint written by `save`, or TrainError."""
    if path.is_dir():
        path = path / CHECKPOINT
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise TrainError(f"--resume {path}: no such checkpoint") from None
    except Exception as e:  # noqa: BLE001 - any fault of the file is the user's to fix
        raise TrainError(f"--resume {path}: not a readable checkpoint "
                         f"({type(e).__name__})") from None  # fmt: skip
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise TrainError(f"--resume {path}: not a specviz train-head checkpoint")
    return blob


def check_identity(saved: dict, ident: dict) -> None:
    """TrainError when `saved` (a checkpoint's identity) names another target than `ident`
    (the keys ident has: a partial one checks the shapes before the layers are hooked)."""
    for key, what in (("vocab", "vocabulary size"), ("hidden", "hidden size"),
                      ("n_layers", "layer count"), ("embed_sha", "embeddings")):  # fmt: skip
        if key in ident and saved.get(key) != ident[key]:
            raise TrainError(f"--resume: the checkpoint was trained for {saved.get('target')} "
                             f"({what} {saved.get(key)}), not {ident['target']} "
                             f"({what} {ident[key]})")  # fmt: skip


def check_resume(blob: dict, ident: dict, config: TrainConfig, draft_vocab_given: bool,
                 data_sha: str) -> None:  # fmt: skip
    """TrainError when the checkpoint was trained for another target, draft vocabulary,
    layers or data than this run's."""
    check_identity(blob["identity"], ident)
    old = TrainConfig.from_json(blob["config"])
    if draft_vocab_given and config.draft_vocab != old.draft_vocab:
        raise TrainError(f"--resume: the checkpoint's draft vocabulary is {old.draft_vocab} "
                         f"tokens, not {config.draft_vocab}")  # fmt: skip
    if config.layers and tuple(config.layers) != tuple(old.layers):
        raise TrainError(f"--resume: the checkpoint reads layers {list(old.layers)}, not "
                         f"{list(config.layers)}")  # fmt: skip
    if blob["data_sha"] != data_sha:
        raise TrainError("--resume: the data differs from the checkpoint's (its token ids, "
                         "masks or weights): give the same --data and --max-length")  # fmt: skip
