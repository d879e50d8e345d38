"""Tools > Bench results: a `specviz bench --json` file drawn as bars per category with
their intervals; a bad file is one message, nothing opens."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specviz.gui.bench.view import BenchResults, BenchView, load_rows


def _row(category, config, speedup, ci, mat):
    return {
        "category": category, "config": config, "questions": 3, "mat": mat,
        "mat_ci": [mat - 0.1, mat + 0.1], "speedup": speedup, "speedup_ci": ci,
        "tokens_per_s": 100.0, "identical": 3, "target_tokens_per_s": 80.0,
        "accepted_by_position": [0.9, 0.8],
    }  # fmt: skip


RESULT = {
    "rows": [
        _row("writing", "model:4", 1.35, [1.28, 1.39], 4.7),
        _row("writing", "lookup:3", 2.21, [2.04, 2.44], 3.3),
        _row("qa", "model:4", 1.10, None, 4.6),
        _row("overall", "model:4", 1.2, [1.1, 1.3], 4.6),
        _row("overall", "lookup:3", 2.0, [1.8, 2.2], 3.1),
    ]
}


def test_bars_and_whiskers_are_the_files_figures(qtbot, tmp_path):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(RESULT), encoding="utf-8")
    view = BenchView(load_rows(str(path)))
    qtbot.addWidget(view)
    assert view.categories == ["writing", "qa", "overall"]
    assert view.configs == ["model:4", "lookup:3"]
    model, lookup = view.bars
    assert list(model.opts["height"]) == pytest.approx([1.35, 1.10, 1.2])
    assert list(lookup.opts["height"]) == pytest.approx([2.21, 0.0, 2.0])  # qa: not measured
    error = view.errors[0].opts
    assert list(error["top"]) == pytest.approx([1.39 - 1.35, 0.0, 0.1])  # qa has no interval
    assert list(error["bottom"]) == pytest.approx([1.35 - 1.28, 0.0, 0.1])
    assert view.one.isVisible()
    view.metric_box.setCurrentText("#MAT")
    assert list(model.opts["height"]) == pytest.approx([4.7, 4.6, 4.6])
    assert not view.one.isVisible()
    heights, lows, _ = view.values("#MAT", "lookup:3")
    assert np.isnan(heights[1]) and lows[0] == pytest.approx(3.2)


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")  # offscreen
def test_alpha_bars_and_an_older_file_without_alpha(qtbot, tmp_path, monkeypatch):
    """A file with alpha shows it with its intervals; one written before bench reported it
    opens all the same, its alpha bars empty (not measured), its other figures drawn."""
    from specviz.gui import dialogs

    monkeypatch.setattr(dialogs, "error", lambda *args: pytest.fail(f"refused: {args[2]}"))
    new = {
        "rows": [
            {**row, "alpha": a, "alpha_ci": [a - 0.02, a + 0.01]}
            for row, a in zip(RESULT["rows"], (0.9, 0.8, 0.7, 0.85, 0.75), strict=True)
        ]
    }
    for name, content in (("new.json", new), ("old.json", RESULT)):
        (tmp_path / name).write_text(json.dumps(content), encoding="utf-8")
    results = BenchResults(None)
    view = results.open(str(tmp_path / "new.json"))
    view.metric_box.setCurrentText("alpha")
    model = view.bars[0]
    assert list(model.opts["height"]) == pytest.approx([0.9, 0.7, 0.85])
    assert list(view.errors[0].opts["bottom"]) == pytest.approx([0.02, 0.02, 0.02])
    assert not view.one.isVisible()
    old = results.open(str(tmp_path / "old.json"))
    assert len(results.views) == 2 and old.configs == ["model:4", "lookup:3"]
    old.metric_box.setCurrentText("alpha")
    heights, lows, highs = old.values("alpha", "model:4")
    assert np.isnan(heights).all() and np.isnan(lows).all() and np.isnan(highs).all()
    assert list(old.bars[0].opts["height"]) == [0.0, 0.0, 0.0]
    assert old.values("speedup", "model:4")[0] == pytest.approx([1.35, 1.10, 1.2])
    for v in list(results.views):
        v.close()


@pytest.mark.parametrize(
    "content, message",
    [
        ("{", "not JSON"),
        ('{"rows": []}', "no rows"),
        (
            '{"rows": [{"category": "a", "config": "b", "questions": 1, "speedup": "x"}]}',
            "'speedup' must be a number",
        ),
        (
            '{"rows": [{"category": "a", "config": "b", "questions": 1, "speedup_ci": [1]}]}',
            "interval",
        ),
    ],
)
def test_a_bad_file_is_one_message(qtbot, tmp_path, monkeypatch, content, message):
    from specviz.gui import dialogs

    shown = []
    monkeypatch.setattr(dialogs, "error", lambda parent, title, text: shown.append(text))
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    results = BenchResults(None)
    assert results.open(str(path)) is None and not results.views
    assert len(shown) == 1 and message in shown[0]


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")  # offscreen
def test_the_tools_menu_opens_a_result(qtbot, tmp_path, monkeypatch):
    from specviz.gui import dialogs
    from specviz.gui.main_window import MainWindow

    path = tmp_path / "bench.json"
    path.write_text(json.dumps(RESULT), encoding="utf-8")
    window = MainWindow(None, autosave=False)
    qtbot.addWidget(window)
    tools = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Tools")
    entry = next(a for a in tools.actions() if a.text() == "Bench results\u2026")
    monkeypatch.setattr(dialogs, "open_path", lambda *args: str(path))
    entry.trigger()
    (view,) = window.bench.views
    assert view.configs == ["model:4", "lookup:3"] and "bench.json" in view.windowTitle()
    view.close()
    window.close_now()
