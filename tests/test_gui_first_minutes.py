"""The window's first ten minutes (issue 48): what a newcomer sees and reaches without the
manual. The Rounds / Output switch beside the stream follows View > Output only."""

from __future__ import annotations

import pytest

from specviz.gui import dialogs
from specviz.gui.main_window import MainWindow


@pytest.fixture(autouse=True)
def quiet(monkeypatch, tmp_path):
    monkeypatch.setattr(dialogs, "AUTO_ANSWER", True)
    monkeypatch.setattr(dialogs, "shown", [])
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def window(qtbot):
    w = MainWindow(None, autosave=False)
    qtbot.addWidget(w)
    w.show()
    yield w
    w.close_now()


def test_the_output_switch_beside_the_stream_follows_the_menu(window):
    stream, action = window.stream, window.view_menu.output_only
    switch = stream.mode
    assert switch.isVisibleTo(window) and switch.rounds_button.isChecked()
    switch.output_button.click()
    assert action.isChecked() and stream.output.isVisibleTo(window)
    assert not stream.view.isVisibleTo(window) and switch.isVisibleTo(window)
    switch.rounds_button.click()
    assert not action.isChecked() and stream.view.isVisibleTo(window)
    action.setChecked(True)  # the menu (Ctrl+T) moves the switch
    assert switch.output_button.isChecked() and not switch.rounds_button.isChecked()
    action.setChecked(False)
    assert switch.rounds_button.isChecked() and stream.view.isVisibleTo(window)


def test_a_chat_pair_starts_from_a_question_and_a_typed_prompt_stays(qtbot):
    """builtin:smollm2 chats by default: its first prompt is a question, not the tiny pair's
    Bible verse; a prompt typed (or given) is never replaced."""
    from specviz.core.resources import chat_example_prompts, example_prompts
    from specviz.gui.setup.controls import Controls

    controls = Controls()
    qtbot.addWidget(controls)
    assert controls.prompt() == example_prompts()[0]  # the tiny pair: text to continue
    controls.offer_chat("an instruct model")  # what a loaded smollm2 says
    assert controls.chat() and controls.prompt() == chat_example_prompts()[0]
    assert controls.examples.itemData(1) == chat_example_prompts()[0]
    assert not controls.prompt().startswith("In the beginning")
    controls.offer_chat(None)  # back to a raw pair: its own example
    assert controls.prompt() == example_prompts()[0]
    controls.prompt_edit.setPlainText("My own text")  # typed
    controls.offer_chat("an instruct model")
    assert controls.prompt() == "My own text"
    given = Controls()
    qtbot.addWidget(given)
    given.set_prompt("Once upon")  # --prompt
    given.set_chat(True, given=True)
    assert given.prompt() == "Once upon"


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_the_window_and_its_frame_fit_the_screen(qtbot, monkeypatch):
    """A screen smaller than the preferred size shows the window maximized (the window
    manager fits its frame: a title bar pushed the status bar below the screen's edge); a
    large screen gets the preferred size, its frame inside the available area."""
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QApplication

    from specviz.gui import app, screen_fit

    monkeypatch.setattr(QApplication, "exec", lambda self: 0)
    monkeypatch.setattr(app, "leave_a_core_for_the_window", lambda: 1)
    before = set(QApplication.topLevelWidgets())
    app.main(None, engine="thread", load=False)
    (window,) = [w for w in QApplication.topLevelWidgets()
                 if isinstance(w, MainWindow) and w not in before]  # fmt: skip
    qtbot.addWidget(window)
    room = window.screen().availableGeometry()
    assert room.width() < 1920 and window.isMaximized()
    # without a window manager (which maximizes it) the window still fits, frame and all
    normal, inner = window.normalGeometry(), room.marginsRemoved(screen_fit.FRAME)
    assert normal.height() <= inner.height()
    assert normal.width() <= max(inner.width(), window.minimumWidth())  # 960 on 800 px
    window.close_now()
    other = MainWindow(None, autosave=False)
    qtbot.addWidget(other)
    large = QRect(0, 0, 2560, 1440)
    screen_fit.show_fitted(other, 1920, 1200, large)
    assert not other.isMaximized() and other.size().toTuple() == (1920, 1200)
    assert large.contains(QRect(other.pos(), other.size().grownBy(screen_fit.FRAME)))
    other.close_now()


def test_the_tree_tabs_fit_key_is_free_and_its_button_fits(qtbot, window):
    """The Tree tab's hint said "Ctrl+0: fit", but View > Normal text size owns Ctrl+0."""
    from PySide6.QtGui import QAction, QKeySequence

    from specviz.gui.tree.view import FIT_KEY

    panel, view = window.tree.panel, window.tree.panel.view
    taken = {k.toString() for a in window.findChildren(QAction) for k in a.shortcuts()}
    fit = QKeySequence(FIT_KEY).toString()
    assert "Ctrl+0" in taken and "Ctrl+0" not in panel.hint.text()
    assert fit not in taken and f"{fit} or Fit: fit" in panel.hint.text()
    view.set_zoom(2.0)
    panel.fit_button.click()
    assert view.zoom == 1.0
    view.set_zoom(2.0)
    qtbot.keyClick(view, FIT_KEY)
    assert view.zoom == 1.0


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_the_status_bar_keeps_the_speedup_and_the_state_in_a_replay_at_1280(
    qtbot, window, tmp_path
):
    """A message no longer hides the measured speedup; a replay says it has no engine; long
    model names and the predictions are cut to the room, never the state."""
    import dataclasses

    from PySide6.QtWidgets import QApplication

    from specviz.core.trace.files import save
    from specviz.core.trace.session import Session
    from specviz.gui.status_bar import REPLAY_ENGINE
    from tests.fixtures import sample_header, sample_rounds

    header = sample_header()
    header = dataclasses.replace(
        header,
        target=dataclasses.replace(header.target, name="HuggingFaceTB/SmolLM2-1.7B-Instruct"),
        draft=dataclasses.replace(header.draft, name="HuggingFaceTB/SmolLM2-135M-Instruct"),
    )
    path = tmp_path / "t.jsonl"
    save(Session(header, sample_rounds()), path)
    window.resize(1280, 720)
    assert window.files.open_trace(path)
    qtbot.waitUntil(lambda: not window.controller.drawing, timeout=10_000)
    status = window.status
    assert status.engine.text() == REPLAY_ENGINE
    status.speedup.setText("speedup 1.23\u00d7 [1.01\u20131.45] faster")
    status.cost.setText("predicted 1.25\u00d7 refined, 1.40\u00d7 Leviathan")
    status.clearMessage()
    QApplication.processEvents()

    def inside(label) -> bool:
        right = label.mapTo(status, label.rect().topRight()).x()
        return label.isVisible() and label.x() >= 0 and right <= status.width()

    assert inside(status.state) and inside(status.speedup) and inside(status.cost)
    assert status.cost.width() >= status.fontMetrics().horizontalAdvance("predicted 1.25\u00d7")
    status.showMessage("The replay is at its last round: Replay from the start (Reset)", 15000)
    QApplication.processEvents()
    assert inside(status.speedup) and inside(status.state)  # the speedup stays in view
    window.new_session()  # leaving the replay: the window's own engine again
    assert status.engine.text() == "engine: this process"


@pytest.mark.parametrize(
    ("drafter", "stop", "said", "not_said"),
    [
        ("eagle3", "limit", "length limit", "copy"),  # it said prompt lookup's "no match to copy"
        ("eagle3", None, "length limit", "copy"),
        ("model", "limit", "length limit", "match"),
        ("lookup", "no_match", "nothing to copy", "length limit"),
        ("lookup", None, "nothing to copy, or the length limit", "suffix"),
        ("suffix", "no_match", "cached output", "copy"),
    ],
)
def test_a_round_that_drafted_nothing_says_why_in_its_drafters_words(
    qtbot, drafter, stop, said, not_said
):
    """The distribution panel reads a bonus-only round's reason from its stop and the
    session's drafter (DrafterSpec.no_match), through the session's header."""
    import dataclasses

    from specviz.core.trace.session import Session
    from specviz.gui.distribution.view import DistributionView
    from tests.fixtures import _event, sample_header, sample_rounds

    bonus = _event(1, "bonus", (0.1, 0.5, 0.2, 0.1, 0.05, 0.05), None)
    rnd = dataclasses.replace(
        sample_rounds()[0], n_drafted=0, n_accepted=0, tokens=(bonus,), stop=stop
    )
    header = dataclasses.replace(sample_header(), drafter={"kind": drafter})
    view = DistributionView()
    qtbot.addWidget(view)
    view.show_position(rnd, 0, Session(header, [rnd]))
    text = view.summary.text()
    assert "nothing was drafted this round" in text
    assert said in text and not_said not in text


FATE_MODULES = ("palette.py", "stream", "distribution", "tree", "plots", "lab/arithmetic_table.py",
                "lab/sequence_panel.py", "lab/bar_plots.py", "lab/montecarlo_panel.py")  # fmt: skip


def test_one_word_per_fate_in_what_the_window_shows():
    """A token's fate is accepted, rejected, discarded, resampled or bonus everywhere: the
    legend's tooltip said "refused", the bars' tag "kept". Every string a fate-showing module
    builds (docstrings aside) is read."""
    import ast
    import re
    from pathlib import Path

    from specviz.gui import palette
    from specviz.gui.distribution.text import drafted_tag

    root = Path(palette.__file__).parent
    other = re.compile(r"\b(kept|refused)\b")
    found = []
    for name in FATE_MODULES:
        paths = [root / name] if name.endswith(".py") else sorted((root / name).rglob("*.py"))
        for path in paths:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docs = {
                id(node.body[0].value)
                for node in ast.walk(tree)
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                and node.body and isinstance(node.body[0], ast.Expr)
            }  # fmt: skip
            found += [
                f"{path.name}:{node.lineno}: {node.value!r}"
                for node in ast.walk(tree)
                if isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docs and other.search(node.value)
            ]  # fmt: skip
    assert found == []
    assert all(other.search(f.meaning) is None for f in palette.FATES.values())
    from tests.test_gui_accept_test import bars

    assert drafted_tag(bars("accepted")).startswith("accepted")


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_the_tune_panel_names_the_fastest_k_and_keeps_its_legend_off_the_data(qtbot, monkeypatch):
    from types import SimpleNamespace

    from PySide6.QtWidgets import QApplication

    from specviz.core.metrics.speedup import Speedup
    from specviz.core.tune.sweep import SweepResult
    from specviz.core.tune.table import KRow, SweepTable
    from specviz.gui.tune import panel as tune_panel

    def row(k, value):
        speedup = Speedup(value, value - 0.1, value + 0.1, "ok", 5.0, 9, 3, 16.0)
        return KRow(k, 2, 10, 0.7, 2.0, speedup, value, value + 0.2)

    rows = (row(2, 1.10), row(3, 1.31), row(4, 1.22))
    curve = tuple((k, 1.0 + k / 10) for k in range(1, 17))
    table = SweepTable(rows, None, 3, curve, 4, ("model", "constant", "token", 3))
    monkeypatch.setattr(tune_panel, "tables_by_category", lambda runs: {"overall": table})
    monkeypatch.setattr(tune_panel, "prompt_rows", lambda runs, costs: [])
    panel = tune_panel.TunePanel()
    qtbot.addWidget(panel)
    panel.resize(900, 760)
    panel.show()
    panel._sweep_id = 5  # a sweep of six runs ends
    panel._on_finished(5, SweepResult(runs=[SimpleNamespace(category="bible")], total=6))
    text = panel.status.text()
    assert f"fastest measured: K 3 ({rows[1].speedup.short()})" in text
    QApplication.processEvents()
    plot = panel.plot
    data = plot.getPlotItem().getViewBox().sceneBoundingRect()
    legend = plot.legend.sceneBoundingRect()
    assert legend.height() > 0 and not legend.intersects(data)


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_the_bench_and_metrics_dialogs_say_what_they_want_and_start_at_the_examples(
    window, monkeypatch
):
    """Tools > Bench results and Engine metrics: a title and a filter that name the file,
    opened in the shipped examples' folder, whose files open."""
    from pathlib import Path

    from specviz.core.resources import resources_dir

    asked = []
    monkeypatch.setattr(dialogs, "open_path", lambda *args: asked.append(args[1:]) or None)
    window.bench.open_dialog()
    window.engine_metrics.open_dialog()
    (b_title, b_start, b_filter), (m_title, m_start, m_filter) = asked
    assert "specviz bench --json" in b_title and "*.json" in b_filter
    assert "/metrics" in m_title and "log" in m_title and "*.log" in m_filter
    examples = resources_dir() / "examples"
    assert Path(b_start) == examples / "bench" and Path(m_start) == examples / "engine-metrics"
    for name in sorted(Path(b_start).glob("*.json")):
        assert window.bench.open(str(name)) is not None
    for name in sorted(Path(m_start).iterdir()):
        assert window.engine_metrics.open(str(name)) is not None, name


def test_help_about_gives_the_version_and_where_the_docs_are(window, monkeypatch):
    import specviz
    from specviz.gui import view_menu

    about = next(a for a in window.menuBar().actions() if a.text() == "&Help").menu()
    names = [a.text() for a in about.actions()]
    assert "About specviz" in names and "Documentation (README)" in names
    window.view_menu.about.trigger()
    kind, title, text = dialogs.shown[-1]
    assert title == "About specviz" and f"specviz {specviz.__version__}" in text
    assert str(view_menu.CHECKOUT / "README.md") in text
    assert str(view_menu.CHECKOUT / "docs") in text
    opened = []
    monkeypatch.setattr(view_menu.QDesktopServices, "openUrl",
                        lambda url: opened.append(url.toLocalFile()) or True)  # fmt: skip
    window.view_menu.docs.trigger()
    assert opened == [str(view_menu.CHECKOUT / "README.md")]
