"""The window's view of `specviz bench` results and of engine metrics (Tools > Bench results,
Tools > Engine metrics)."""

from __future__ import annotations

from pathlib import Path

from specviz.core.resources import resources_dir


def start_folder(remembered: str, examples: str) -> str:
    """Where a file dialog opens: the folder of the last file opened, else the shipped
    examples (resources/examples/<examples>) where there are some, else the working folder."""
    if remembered:
        return remembered
    folder = resources_dir() / "examples" / examples
    return str(folder) if folder.is_dir() else str(Path.cwd())
