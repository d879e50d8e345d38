"""Golden traces: same-seed sessions on the built-in tiny pair, their round lines (timings
left out) compared with files under tests/data/ written by the code before the round's
step was shared by chains and trees (issue 32). A chain's trace stays bit for bit what it
was; a tree's only where the trace format says it changed (its tokens' `p`, issue 32).

SPECVIZ_WRITE_GOLDEN=1 rewrites the files (then review the diff: that is the change).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
CHAIN_GOLDEN = DATA / "chain_golden.json"
TREE_GOLDEN = DATA / "tree_golden.json"
TIMINGS = ("draft_ms", "verify_ms", "events_ms", "probes")
PROMPT = "In the beginning God created"

# name: (Settings fields, DrafterConfig kind)
CHAIN_CASES = {
    "greedy-K1": (dict(k=1, temperature=0), "model"),
    "greedy-K4": (dict(k=4, temperature=0), "model"),
    "T1-K1": (dict(k=1, temperature=1.0), "model"),
    "T1-K4": (dict(k=4, temperature=1.0), "model"),
    "T0.8-K4-topp": (dict(k=4, temperature=0.8, top_p=0.9), "model"),
    "block-T1-K4": (dict(k=4, temperature=1.0, verifier="block"), "model"),
    "typical-T1-K4": (dict(k=4, temperature=1.0, verifier="typical"), "model"),
    "lookup-T1-K4": (dict(k=4, temperature=1.0), "lookup"),
}
TREE_CASES = {
    "tree-sample-T1-K3": dict(k=3, temperature=1.0, tree_width=2, tree_budget=8),
    "tree-topk-T1-K3": dict(
        k=3, temperature=1.0, tree_width=3, tree_budget=10, tree_draw="topk"
    ),  # fmt: skip
    "tree-greedy-K2": dict(k=2, temperature=0, tree_width=2, tree_budget=6),
}


@pytest.fixture(scope="module")
def tiny():
    from specviz.core.models.pair import load_pair

    return load_pair("builtin:tiny", "builtin:tiny")


def session_lines(pair, fields: dict, kind: str = "model") -> list[dict]:
    """The round lines of one seeded session, as JSON reads them back, timings dropped."""
    from specviz.core.drafters.registry import DrafterConfig
    from specviz.core.engine.speculative import SpeculativeEngine
    from specviz.core.trace.records import Settings
    from specviz.core.trace.serialize import dumps, round_to_json

    settings = Settings(seed=11, max_new_tokens=20, top_n=5, **fields)
    engine = SpeculativeEngine(pair, settings, drafter=DrafterConfig(kind))
    engine.prefill(PROMPT, calibrate=False)
    lines = []
    for rnd in engine.run():
        obj = json.loads(dumps(round_to_json(rnd)))
        lines.append({k: v for k, v in obj.items() if k not in TIMINGS})
    return lines


def _compare(path: Path, name: str, lines: list[dict]) -> None:
    if os.environ.get("SPECVIZ_WRITE_GOLDEN"):
        golden = json.loads(path.read_text()) if path.exists() else {}
        golden[name] = lines
        path.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    golden = json.loads(path.read_text())
    assert name in golden, f"{name} missing from {path.name}: SPECVIZ_WRITE_GOLDEN=1"
    expected = golden[name]
    assert len(lines) == len(expected)
    for i, (ours, theirs) in enumerate(zip(lines, expected, strict=True)):
        assert ours == theirs, f"{name}: round {i} differs from the golden trace"


@pytest.mark.parametrize("name", list(CHAIN_CASES))
def test_chain_trace_is_the_golden_one(tiny, name):
    fields, kind = CHAIN_CASES[name]
    _compare(CHAIN_GOLDEN, name, session_lines(tiny, fields, kind))


@pytest.mark.parametrize("name", list(TREE_CASES))
def test_tree_trace_is_the_golden_one(tiny, name):
    _compare(TREE_GOLDEN, name, session_lines(tiny, TREE_CASES[name]))
