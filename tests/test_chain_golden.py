"""Golden traces: same-seed sessions on the built-in tiny pair, their round lines (timings
left out) compared with files under tests/data/ written by the code before the round's
step was shared by chains and trees (issue 32). A chain's trace stays bit for bit what it
was; a tree's only where the trace format says it changed (its tokens' `p`, issue 32).

Every id, status, count and text must match exactly; a probability, a draw or a score
within FLOAT_TOL (absolute, relative above 1): the files were written on one CPU, and
another CPU's kernels (AVX2 against AVX-512, another thread count) round the models' last
bits differently (about 1e-7; a few 1e-6 in a residual p - q, the difference of two close
numbers), which no code change of ours would. A change of the code shows as a different
token, status or count, or a float off by far more.

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
FLOAT_TOL = 1e-5  # the last-bit differences between CPUs: 1e-7, a few 1e-6 in residuals

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
REPEATS = "the cat sat on the mat. the cat sat on the mat. the cat sat on the"
# More drafters, chains and trees (recorded before issue 51's one Proposal and Verifier):
# name: (Settings fields, drafter kind, its parameters, prompt)
DRAFTER_CASES = {
    "eagle3-T1-K4": (dict(k=4, temperature=1.0), "eagle3", {}, PROMPT),
    "early-exit-T1-K3": (dict(k=3, temperature=1.0), "early-exit", {}, PROMPT),
    "string-T1-K3": (dict(k=3, temperature=1.0), "string", {}, PROMPT),
    "tli-T1-K3": (dict(k=3, temperature=1.0), "tli", {}, PROMPT),
    "suffix-greedy-K4": (dict(k=4, temperature=0), "suffix", {"suffix_cache": 0}, REPEATS),
    "eagle3-tree-T1-K3": (
        dict(k=3, temperature=1.0, tree_width=2, tree_budget=8),
        "eagle3",
        {},
        PROMPT,
    ),
    "suffix-tree-greedy-K3": (
        dict(k=3, temperature=0, tree_width=2, tree_budget=8),
        "suffix",
        {"suffix_cache": 0},
        REPEATS,
    ),
}


@pytest.fixture(scope="module")
def tiny():
    from specviz.core.models.pair import load_pair

    return load_pair("builtin:tiny", "builtin:tiny")


def session_lines(pair, fields: dict, kind: str = "model", params: dict | None = None,
                  prompt: str = PROMPT) -> list[dict]:  # fmt: skip
    """The round lines of one seeded session, as JSON reads them back, timings dropped."""
    from specviz.core.drafters.registry import DrafterConfig
    from specviz.core.engine.speculative import SpeculativeEngine
    from specviz.core.trace.records import Settings
    from specviz.core.trace.serialize import dumps, round_to_json

    settings = Settings(seed=11, max_new_tokens=20, top_n=5, **fields)
    engine = SpeculativeEngine(pair, settings, drafter=DrafterConfig(kind, **(params or {})))
    engine.prefill(prompt, calibrate=False)
    lines = []
    for rnd in engine.run():
        obj = json.loads(dumps(round_to_json(rnd)))
        lines.append({k: v for k, v in obj.items() if k not in TIMINGS})
    return lines


def _difference(ours, theirs, where: str) -> str | None:
    """Where ours first differs from theirs (None: the same): exactly, but for floats
    within FLOAT_TOL."""
    if isinstance(ours, float) or isinstance(theirs, float):
        same = isinstance(ours, int | float) and isinstance(theirs, int | float)
        ok = same and abs(ours - theirs) <= FLOAT_TOL * max(abs(ours), abs(theirs), 1.0)
        return None if ok else f"{where}: {ours!r} against {theirs!r}"
    if isinstance(ours, dict) and isinstance(theirs, dict):
        if ours.keys() != theirs.keys():
            return f"{where}: keys {sorted(ours.keys() ^ theirs.keys())}"
        diffs = (_difference(ours[k], theirs[k], f"{where}.{k}") for k in sorted(ours))
        return next((d for d in diffs if d), None)
    if isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs):
            return f"{where}: {len(ours)} items against {len(theirs)}"
        diffs = (_difference(a, b, f"{where}[{j}]") for j, (a, b) in
                 enumerate(zip(ours, theirs, strict=True)))  # fmt: skip
        return next((d for d in diffs if d), None)
    return None if ours == theirs and type(ours) is type(theirs) else (
        f"{where}: {ours!r} against {theirs!r}")  # fmt: skip


def test_the_comparison_sees_a_changed_token_and_a_moved_float():
    line = {"tokens": [{"id": 14, "status": "accepted", "p": 0.0854214}], "n_accepted": 1}
    assert _difference(line, json.loads(json.dumps(line)), "r") is None
    near = {"tokens": [{"id": 14, "status": "accepted", "p": 0.0854214 * (1 + 1e-7)}],
            "n_accepted": 1}  # fmt: skip
    assert _difference(near, line, "r") is None
    for bad in ({"tokens": [{"id": 15, "status": "accepted", "p": 0.0854214}], "n_accepted": 1},
                {"tokens": [{"id": 14, "status": "rejected", "p": 0.0854214}], "n_accepted": 1},
                {"tokens": [{"id": 14, "status": "accepted", "p": 0.0855}], "n_accepted": 1},
                {"tokens": [{"id": 14, "status": "accepted", "p": 0.0854214}], "n_accepted": 2},
                {"tokens": [], "n_accepted": 1}):  # fmt: skip
        assert _difference(bad, line, "r") is not None


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
        where = _difference(ours, theirs, f"round {i}")
        assert where is None, f"{name}: {where} differs from the golden trace"


@pytest.mark.parametrize("name", list(CHAIN_CASES))
def test_chain_trace_is_the_golden_one(tiny, name):
    fields, kind = CHAIN_CASES[name]
    _compare(CHAIN_GOLDEN, name, session_lines(tiny, fields, kind))


@pytest.mark.parametrize("name", list(TREE_CASES))
def test_tree_trace_is_the_golden_one(tiny, name):
    _compare(TREE_GOLDEN, name, session_lines(tiny, TREE_CASES[name]))


@pytest.mark.parametrize("name", list(DRAFTER_CASES))
def test_drafter_trace_is_the_golden_one(tiny, name):
    fields, kind, params, prompt = DRAFTER_CASES[name]
    golden = TREE_GOLDEN if fields.get("tree_width", 1) > 1 else CHAIN_GOLDEN
    _compare(golden, name, session_lines(tiny, fields, kind, params, prompt))
