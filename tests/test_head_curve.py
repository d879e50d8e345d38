"""scripts/head_curve.py: train-head curves on one axis of trained tokens (a warm start's
offset added), a table, a figure, and one line for what it cannot read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures import script


@pytest.fixture(scope="module")
def curve():
    with script("head_curve") as module:
        yield module


def write_run(path: Path, points: list[tuple[int, float]]) -> Path:
    curve = [{"step": i, "trained": t, "mat_k3": m - 0.01, "mat_k4": m}
             for i, (t, m) in enumerate(points)]  # fmt: skip
    path.write_text(json.dumps({"curve": curve}))
    return path


def test_offsets_line_up_a_warm_start_and_the_figure_is_drawn(curve, tmp_path, capsys):
    scratch = write_run(tmp_path / "a.json", [(40_000, 1.2), (160_000, 1.37)])
    warm = write_run(tmp_path / "b.json", [(0, 1.65), (500_000, 1.7)])
    out = tmp_path / "fig" / "curve.png"
    assert curve.main([f"scratch={scratch}", f"warm={warm}+2000000", "--out", str(out)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert any(r.startswith("warm") and "2,000,000" in r and "1.650" in r for r in rows)
    assert any(r.startswith("warm") and "2,500,000" in r and "1.700" in r for r in rows)
    assert any(r.startswith("scratch") and "160,000" in r and "1.370" in r for r in rows)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "spec, words",
    [("no-equals-sign", "expected LABEL=PATH"), ("x={run}+abc", "whole number"),
     ("x={missing}", "not a training.json"), ("x={bad}", "no curve of train-head's")],
)  # fmt: skip
def test_what_it_cannot_read_is_one_line(curve, tmp_path, spec, words):
    run = write_run(tmp_path / "run.json", [(1, 1.0)])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"curve": [{"step": 1}]}))
    spec = spec.format(run=run, missing=tmp_path / "none.json", bad=bad)
    with pytest.raises(SystemExit) as stop:
        curve.main([spec])
    assert words in str(stop.value)
