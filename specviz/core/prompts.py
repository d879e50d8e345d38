"""Example prompts shipped in resources/prompts.txt (one per line)."""

from __future__ import annotations

from pathlib import Path

from specviz.core.paths import resources_dir


def prompts_file() -> Path:
    """resources/prompts.txt, under $SPECVIZ_RESOURCES when that is set."""
    return resources_dir() / "prompts.txt"


def example_prompts() -> list[str]:
    lines = prompts_file().read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]
