"""Where specviz finds its resources and keeps its cache (one answer each), and the example
prompts it ships.

Both honour an environment variable (SPECVIZ_RESOURCES, SPECVIZ_CACHE) and expand `~`, so
every module that reads a resource or writes to the cache agrees on the folder.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_TEXT_FILE = 16 << 20  # a prompt or a prompt set: 16 MiB at most


def resources_dir() -> Path:
    """$SPECVIZ_RESOURCES if set, else `<repo>/resources` found from this file (a checkout
    or an editable install)."""
    override = os.environ.get("SPECVIZ_RESOURCES")
    if override:
        return Path(override).expanduser()
    return Path(__file__).resolve().parents[2] / "resources"


def cache_dir() -> Path:
    """$SPECVIZ_CACHE if set, else ~/.cache/specviz: the autosave, converted models."""
    override = os.environ.get("SPECVIZ_CACHE")
    return Path(override).expanduser() if override else Path.home() / ".cache" / "specviz"


def prompts_file() -> Path:
    """resources/prompts.txt, under $SPECVIZ_RESOURCES when that is set."""
    return resources_dir() / "prompts.txt"


def example_prompts() -> list[str]:
    lines = prompts_file().read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def chat_example_prompts() -> list[str]:
    """The first turns of resources/prompts/chat.jsonl: questions for an instruct pair (a
    chat target answers a question; the tiny pair's Bible verses are no question)."""
    import json

    path = resources_dir() / "prompts" / "chat.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    return [json.loads(line)["turns"][0] for line in lines if line.strip()]


def check_regular_file(path: str | os.PathLike[str]) -> None:
    """OSError unless path is a regular file: a FIFO with no writer would block a reader
    forever, and a device such as /dev/zero never ends. Never opens the file."""
    mode = os.stat(path).st_mode  # FileNotFoundError, PermissionError as they are
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(21, "is a folder, not a file", str(path))
    if not stat.S_ISREG(mode):
        raise OSError("not a regular file (a FIFO, a socket or a device)")


def read_text_bounded(path: str | os.PathLike[str], limit: int = MAX_TEXT_FILE) -> str:
    """A regular file's UTF-8 text, at most `limit` bytes (OSError beyond, or for anything
    that is not a regular file); UnicodeDecodeError as read_text raises it."""
    check_regular_file(path)
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(f"larger than {limit >> 20} MiB, too large for a prompt file")
    return data.decode("utf-8")


# The window's first-launch seed: with the built-in default pair and the first example
# prompt, the first three rounds show all five fates (tests/test_gui_window.py checks it;
# with seeds 3 and 4 every draft is accepted for three rounds). Retraining the pair may
# need another one.
DEMO_SEED = 1
