"""Tools > Engine metrics: what `specviz doctor` reads, in the window: the figures core's
report computes, its findings, per-position bars beside the session's own; a bad file is
one message, nothing opens."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specviz.cli.bench.doctor import read_source
from specviz.core.bench.doctor import diagnose, session_record
from specviz.core.metrics.engine_metrics import read_record
from specviz.core.metrics.running import fold
from specviz.gui.bench.doctor_view import FIGURES, EngineMetrics, EngineMetricsView
from tests.fixtures import sample_session

DATA = Path(__file__).parent / "data" / "doctor"
FILES = sorted(DATA.iterdir())


def _core(path: Path, c=None):
    return diagnose(read_record(read_source(str(path), 10.0)), c)


def _same(shown: np.ndarray | None, expected) -> bool:
    if not expected:
        return shown is None
    want = np.array([np.nan if v is None else v for v in expected], dtype=float)
    return shown is not None and np.allclose(shown, want, equal_nan=True)


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")  # offscreen
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_each_sample_shows_cores_figures_and_findings(qtbot, path):
    assert len(FILES) >= 7
    expected = _core(path)
    opener = EngineMetrics(None)
    view = opener.open(str(path))
    assert view is not None and path.name in view.windowTitle()
    qtbot.addWidget(view)
    for _, attr, fmt, _ in FIGURES:
        value = getattr(expected, attr)
        assert view.values[attr][0].text() == ("n/a" if value is None else fmt.format(value))
        assert view.values[attr][1].text() == "n/a"  # no session
    assert [label.text() for label in view.findings] == [
        f"[{f.code}] {f.message}" for f in expected.findings
    ]
    engine_u, engine_c, session_u, session_c = view.curves()
    assert _same(engine_u, expected.per_position_unconditional)
    assert _same(engine_c, expected.per_position_conditional)
    assert session_u is None and session_c is None  # the engine's curve alone
    assert not view.bars[2].isVisible() and not view.bars[3].isVisible()
    if expected.per_position_unconditional:
        heights = view.bars[0].opts["height"]
        assert list(heights) == pytest.approx(list(expected.per_position_unconditional))
        assert not view.empty.isVisible()
    else:
        assert view.empty.isVisible()
    assert "No session" in view.session_note.text()
    view.close()


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
@pytest.mark.parametrize(
    "content, message",
    [
        ("nothing an engine writes\n", "found no speculative-decoding record"),
        (
            "vllm:spec_decode_num_drafts_total 10\nvllm:spec_decode_num_draft_tokens_total 40\n"
            "vllm:spec_decode_num_accepted_tokens_total 50\n",
            "inconsistent counters",
        ),
        ("vllm:spec_decode_num_drafts_total nan\n", "not a count"),
        (b"\x00\x01binary", "binary data"),
    ],
)
def test_a_bad_file_is_one_message(qtbot, tmp_path, monkeypatch, content, message):
    from specviz.gui import dialogs

    shown = []
    monkeypatch.setattr(dialogs, "error", lambda parent, title, text: shown.append(text))
    path = tmp_path / "bad.txt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    opener = EngineMetrics(None)
    assert opener.open(str(path)) is None and not opener.views
    assert opener.open(str(tmp_path)) is None  # a folder
    assert opener.open(str(tmp_path / "missing.txt")) is None
    assert opener.open("http://localhost:1/metrics") is None  # no URL from the window
    assert len(shown) == 4 and message in shown[0]
    assert "folder" in shown[1] and "no such file" in shown[2] and "local files" in shown[3]


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_the_sessions_curve_stands_beside_the_engines(qtbot):
    session = sample_session(6)
    stats = fold(session)
    expected = diagnose(session_record(stats), stats.cost_ratio)
    engine = _core(DATA / "vllm_metrics_healthy.txt")
    view = EngineMetricsView(engine, "(healthy)", lambda: stats)
    qtbot.addWidget(view)
    engine_u, engine_c, session_u, session_c = view.curves()
    assert _same(session_u, expected.per_position_unconditional)
    assert _same(session_c, expected.per_position_conditional)
    # the sample alternates [accepted, rejected, ...] and [accepted, bonus]: position 1 kept
    # in every round, position 2 in none that reached it
    assert list(session_u) == pytest.approx([1.0, 0.0])
    assert all(bar.isVisible() for bar in view.bars)
    assert list(view.bars[2].opts["height"]) == pytest.approx([1.0, 0.0])
    for _, attr, fmt, _ in FIGURES:
        assert view.values[attr][1].text() == fmt.format(getattr(expected, attr))
    assert "6 rounds that drafted" in view.session_note.text()
    best = diagnose(engine.record, stats.cost_ratio)
    assert f"{best.best_k}, predicted {best.best_speedup:.2f}x" in view.best_k.text()
    # four bars a position, side by side and not overlapping
    xs = [view.bars[i].opts["x"][0] for i in range(4)]
    assert xs == sorted(xs) and len(set(xs)) == 4
    # the session grows: the bars follow at the next refresh
    stats.add(session.rounds[0])
    view.refresh_session()
    assert "7 rounds that drafted" in view.session_note.text()
    view.close()


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")  # offscreen
def test_the_tools_menu_opens_a_file_beside_the_windows_session(qtbot, tmp_path, monkeypatch):
    from specviz.core.trace.files import save
    from specviz.gui import dialogs
    from specviz.gui.main_window import MainWindow

    trace = tmp_path / "session.jsonl"
    save(sample_session(4), trace)
    window = MainWindow(None, autosave=False)
    qtbot.addWidget(window)
    tools = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Tools")
    entry = next(a for a in tools.actions() if a.text() == "Engine metrics\u2026")
    monkeypatch.setattr(dialogs, "open_path", lambda *args: str(DATA / "vllm_log_cliff.log"))
    entry.trigger()
    (alone,) = window.engine_metrics.views
    assert alone.session is None and alone.curves()[2] is None
    alone.close()
    assert window.files.open_trace(trace)
    qtbot.waitUntil(lambda: not window.controller.drawing, timeout=20000)
    entry.trigger()
    (view,) = [v for v in window.engine_metrics.views if v is not alone]
    assert view.session is not None and view.session.record.drafts == 4
    assert view.curves()[2] is not None and view.bars[2].isVisible()
    assert "vllm_log_cliff.log" in view.windowTitle()
    view.close()
    window.close_now()


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_text_from_the_file_is_plain_text(qtbot, tmp_path):
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QLabel

    path = tmp_path / "<b>bold<i>x.log"
    path.write_bytes((DATA / "vllm_log_cliff.log").read_bytes())
    view = EngineMetrics(None).open(str(path))
    qtbot.addWidget(view)
    assert "<b>bold<i>x.log" in view.header.text()
    labels = view.findChildren(QLabel)
    assert len(labels) > 10
    assert all(label.textFormat() == Qt.TextFormat.PlainText for label in labels)
    view.close()
