"""Issue 11 leftovers: a name shared by several modules is defined once and imported, and
Leviathan et al. is cited by one arXiv number everywhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "specviz").rglob("*.py"))


def assigned(name: str) -> list[str]:
    """The modules that assign `name` at their top level."""
    found = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found.append(str(path.relative_to(ROOT)))
    return found


def test_progress_and_rest_label_are_defined_once():
    assert assigned("Progress") == ["specviz/core/models/smollm2.py"]
    assert assigned("REST_LABEL") == ["specviz/core/metrics/position_bars.py"]


# The papers cited by number: Leviathan et al. 2023 (the rule) and Sun et al. 2024 (block
# verification). Seed 003 prints Leviathan's as 2211.17002: a typo nobody may copy.
PAPERS = {"2211.17192", "2403.10444", "2401.10774", "2305.09781", "2411.04975", "2503.01840",
          "2502.05202"}  # fmt: skip
# + Medusa, SpecInfer, SuffixDecoding (Oliaro et al.), EAGLE-3 (Li et al.), TLI (Timor et al.)


def test_leviathan_is_cited_as_2211_17192():
    wrong = []
    for path in [ROOT / "README.md", *SOURCES]:
        for number in re.findall(r"arXiv:\s*(\d{4}\.\d{4,5})", path.read_text(encoding="utf-8")):
            if number not in PAPERS:
                wrong.append(f"{path.relative_to(ROOT)}: {number}")
    assert wrong == []


def test_start_worker_is_defined_once():
    """The lab's panels start their workers with one helper."""
    defined = [
        str(path.relative_to(ROOT))
        for path in SOURCES
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef) and node.name == "start_worker"
    ]
    assert defined == ["specviz/gui/session/threads.py"]


def test_the_engine_builds_a_round_in_run_round_only():
    """core.engine makes a Round in one place, with all its fields (greedy_diff included):
    no module there builds another or amends a finished one with dataclasses.replace."""
    built, amended = [], []
    for path in sorted((ROOT / "specviz" / "core" / "engine").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef):
                continue
            for node in ast.walk(func):
                if not isinstance(node, ast.Call):
                    continue
                name = (
                    node.func.attr
                    if isinstance(node.func, ast.Attribute)
                    else getattr(node.func, "id", None)
                )
                where = f"{path.name}:{func.name}"
                if name in ("Round", "make_round"):
                    built.append(where)
                first = node.args[0] if node.args else None
                if name == "replace" and isinstance(first, ast.Name) and first.id == "rnd":
                    amended.append(where)
    assert built == ["round_step.py:run_round"] and amended == []


def _calls(name: str) -> list[str]:
    """Where specviz calls `name`: module:function, once per call."""
    found = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == name:
                    found.append(f"{path.relative_to(ROOT).as_posix()}:{func.name}")
    return found


def test_a_round_is_built_in_one_place():
    """Issue 51: rounds.make_round is the one Round(...) in specviz, and the engine's round
    (chains and trees) and the trace reader are what call it."""
    assert _calls("Round") == ["specviz/core/trace/rounds.py:make_round"]
    assert sorted(_calls("make_round")) == [
        "specviz/core/engine/round_step.py:run_round",
        "specviz/core/trace/parse.py:parse_round",
    ]
