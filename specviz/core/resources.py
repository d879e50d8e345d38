"""Where specviz finds its resources and keeps its cache (one answer each), and the example
prompts it ships.

Both honour an environment variable (SPECVIZ_RESOURCES, SPECVIZ_CACHE) and expand `~`, so
every module that reads a resource or writes to the cache agrees on the folder.
"""

from __future__ import annotations

import os
from pathlib import Path


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
