"""Example prompts shipped in resources/prompts.txt (one per line)."""

from __future__ import annotations

from pathlib import Path

PROMPTS_FILE = Path(__file__).resolve().parents[2] / "resources" / "prompts.txt"


def example_prompts() -> list[str]:
    lines = PROMPTS_FILE.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]
