"""What keeps the window's redraw cheap and flat (benchmarks/gui_redraw.py measures it):
one paint per view per round, axes that move in steps, the distribution summary's height
that only grows, and rounds drawn together while running that show exactly what Steps
show."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QWidget

from specviz.core.metrics.running import RunningStats
from specviz.gui import dialogs
from specviz.gui.distribution.view import DistributionView
from specviz.gui.main_window import MainWindow
from specviz.gui.plots.plot_kit import StickyRange, nice_ceiling
from specviz.gui.plots.round_plots import Plots
from specviz.gui.session.loaded import Loaded
from specviz.gui.session.state import State
from tests.fixtures import synthetic_session


@pytest.fixture(autouse=True)
def quiet(monkeypatch, tmp_path):
    monkeypatch.setattr(dialogs, "AUTO_ANSWER", True)
    monkeypatch.setattr(dialogs, "shown", [])
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))


class PaintCounter(QObject):
    """Counts the paint events of the widgets it is installed on."""

    def __init__(self, widgets: dict):
        super().__init__()
        self.counts = dict.fromkeys(widgets, 0)
        self._names = {id(w): name for name, w in widgets.items()}
        for widget in widgets.values():
            widget.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.counts[self._names[id(obj)]] += 1
        return False


class LayoutCounter(QObject):
    """Counts the layout requests of a widget and its children."""

    def __init__(self, top: QWidget):
        super().__init__()
        self.count, self.seen = 0, []
        for widget in [top, *top.findChildren(QWidget)]:
            widget.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:
            self.count += 1
            self.seen.append(type(obj).__name__)
        return False


def feed(window: MainWindow, rounds, running: bool = False) -> None:
    """Rounds handed to the window's controller as the worker hands them."""
    c = window.controller
    if running:
        c._set_state(State.RUNNING)
    for rnd in rounds:
        c.engine.round_ready.emit(rnd)


def make_window(qtbot, session) -> MainWindow:
    window = MainWindow(None, autosave=False)
    qtbot.addWidget(window)
    window.show()
    h = session.header  # models "loaded" (the worker has none: a Step asks it for nothing)
    window.controller.models = Loaded("synthetic", "synthetic", h.target, h.draft, "cpu", 50257)
    window.controller.engine.session_started.emit(h)  # as the worker says it
    return window


def test_nice_ceiling_and_sticky_range():
    assert [nice_ceiling(v) for v in (0.031, 0.3, 1.0, 1.01, 7.9, 130)] == [
        0.04, 0.3, 1.0, 1.2, 8.0, 150.0,
    ]  # fmt: skip
    sticky = StickyRange(0.0, 1.0)
    assert not sticky.fit(0.0, 0.9) and (sticky.low, sticky.high) == (0.0, 1.0)
    assert sticky.fit(0.0, 3.1) and sticky.high == 4.0  # 3.1 x 1.15 -> 4
    assert not sticky.fit(0.0, 3.4)  # still inside: the axis stays as it is
    assert sticky.fit(0.0, 1.2) and sticky.high == 1.5  # the data fill < 1/3 of it
    assert sticky.fit(-0.5, 1.2) and sticky.low == -0.6
    sticky.reset()
    assert (sticky.low, sticky.high) == (0.0, 1.0)


def test_plot_axes_cover_the_data_and_move_in_steps(qtbot):
    """No auto-range (it fits the view in the paint, then paints again): the y ranges are
    set from the data, in steps, and always show every point."""
    plots = Plots()
    qtbot.addWidget(plots)
    session = synthetic_session(300)
    running = RunningStats.for_header(session.header)
    views = {
        "speedup": (plots.plots["speedup"].vb, plots.curves[4:8]),
        "per_forward": (plots.per_forward_view, plots.curves[8:]),
        "lengths": (plots.plots["accepted_length"].vb, ()),
    }
    ranges = {name: set() for name in views}
    for rnd in session.rounds:
        plots.add(running.add(rnd), running)
        for name, (view, curves) in views.items():
            assert not view.state["autoRange"][1]
            low, high = view.viewRange()[1]
            ranges[name].add((low, high))
            data = [plots.series(c)[1] for c in curves]
            if not curves:
                data = [np.array(running.accepted_lengths, dtype=float)]
            finite = np.concatenate([d[np.isfinite(d)] for d in data])
            assert finite.size == 0 or low <= finite.min() and finite.max() <= high
    assert all(1 <= len(r) <= 12 for r in ranges.values()), ranges  # not once per round


def test_a_step_paints_each_view_once(qtbot):
    session = synthetic_session(70)
    window = make_window(qtbot, session)
    rounds = [dataclasses.replace(r, finish_reason=None) for r in session.rounds]
    window.controller.add_rounds(rounds[:50])
    qtbot.wait(10)
    d = window.distribution
    views = {
        "plots": window.plots.graphics.viewport(),
        "main": d.main.viewport(),
        "residual": d.residual_plot.viewport(),
        "gauge": d.gauge.viewport(),
    }
    for rnd in rounds[50:53]:  # the summary's height settles
        feed(window, [rnd])
        qtbot.wait(5)
    counter = PaintCounter(views)
    layouts = LayoutCounter(window)
    for rnd in rounds[53:61]:
        feed(window, [rnd])
        assert window.distribution.selected[0] == rnd.index
        for _ in range(3):
            qtbot.wait(1)
    # 8 Steps: the plots and the main bars once each (pyqtgraph's auto-range and view
    # transform, left to the paint, asked for a second one); the small plots may be laid
    # out again when their title changes ("residual: none")
    assert counter.counts["plots"] == 8 and counter.counts["main"] == 8, counter.counts
    assert counter.counts["residual"] <= 10 and counter.counts["gauge"] <= 10, counter.counts
    # and nothing is laid out again: new texts fit the room they had (gui/stream/rich_line.py,
    # status.Figure), the axes keep their widths
    assert layouts.count <= 1, layouts.seen
    window.close_now()


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_the_summary_only_grows(qtbot):
    """The summary's box sets the plots' heights: it grows to the longest text shown (up to
    a few lines, the rest scrolled) and does not shrink back (which would lay the panel out
    again at the next position); the text inside it leaves no empty room to scroll to."""
    view = DistributionView()
    qtbot.addWidget(view)
    view.resize(700, 600)
    view.show()
    session = synthetic_session(12)
    heights = []
    for rnd in session.rounds:
        for position in range(len(rnd.tokens) - 1):
            view.show_position(rnd, position, session)
            summary, area = view.summary, view.summary_area
            assert summary.height() >= summary.needed_height()
            assert summary.height() <= max(summary.needed_height(), area.height())
            heights.append(area.height())
    assert heights == sorted(heights) and max(heights) <= view.summary_area.most()


def window_state(window: MainWindow) -> dict:
    plots = window.plots
    return {
        "stream": window.stream.view.toPlainText(),
        "rounds": window.stream.view.round_count,
        "slider": window.stream.slider.maximum(),
        "label": window.stream.round_label.text(),
        "series": [
            [[None if np.isnan(v) else v for v in a] for a in plots.series(c)] for c in plots.curves
        ],  # fmt: skip
        "lengths": list(plots.length_bars.opts["height"]),
        "status": [
            label.text()
            for label in (
                window.status.rounds,
                window.status.speed,
                window.status.acceptance,
                window.status.speedup,
            )
        ],  # fmt: skip
        "predictions": window.status.cost.full_text,  # as shown, cut to the room it has
        "selected": window.distribution.selected,
        "summary": window.distribution.summary.text(),
        "bars": list(window.distribution.q_item.opts["width"]),
    }


def test_rounds_drawn_together_while_running_show_what_steps_show(qtbot):
    """While running, the stream, slider and status bar follow at frame rate and the plots
    and bars at REFRESH_MS; every round's figures still go into the plots, and once the run
    pauses or ends the window shows exactly what a Step per round shows."""
    session = synthetic_session(40)  # its last round ends the session
    stepped = make_window(qtbot, session)
    feed(stepped, session.rounds)
    ran = make_window(qtbot, session)
    feed(ran, session.rounds[:30], running=True)
    # nothing was drawn per round: the stream waits for the frame timer
    assert ran.stream.view.round_count < 30 and ran.plots.rounds == 30
    qtbot.waitUntil(lambda: ran.stream.view.round_count == 30, timeout=5000)
    ran.controller.pause()
    assert ran.state is State.PAUSED and ran.stream.view.round_count == 30
    assert ran.distribution.selected[0] == 29  # drawn at the pause
    feed(ran, session.rounds[30:], running=True)  # Run again, to the session's end
    assert ran.state is State.FINISHED
    assert window_state(ran) == window_state(stepped)
    for window in (stepped, ran):
        window.close_now()


def test_hints_name_the_keys_that_work_in_a_text_field(qtbot):
    """Space and R type into the prompt (issue 15 item 3): every hint names the F-keys the
    actions really have."""
    window = MainWindow(None, autosave=False)
    qtbot.addWidget(window)
    step = window.actions_.step.shortcuts()[0].toString()
    run = window.actions_.run.shortcuts()[0].toString()
    assert (step, run) == ("F10", "F5")
    hints = [window.stream.round_label.text()]
    window.stream.clear(synthetic_session(1).header)
    hints.append(window.stream.round_label.text())
    assert all(f"Step ({step})" in hint and "Space" not in hint for hint in hints)
    assert f"Run ({run})" in hints[1] and "(R)" not in hints[1]
    window.stream.banner.show_end("max_new_tokens")
    continue_key = window.actions_.continue_.shortcut().toString()
    assert window.stream.banner.continue_button.toolTip().endswith(f"({continue_key})")
    window.close_now()


def test_status_figures_only_grow(qtbot):
    """A new round's figures change the status bar's texts without laying the window out
    again: their labels have a fixed size that grows to the widest text."""
    from specviz.gui.status_bar import Figure

    label = Figure("")
    qtbot.addWidget(label)
    label.setText("rounds: 99")
    wide = label.width()
    assert label.minimumWidth() == label.maximumWidth() == wide >= label.sizeHint().width()
    label.setText("rounds: 1")  # narrower: the label keeps its size
    assert label.width() == wide and label.text() == "rounds: 1"
    label.setText("rounds: 100000")
    assert label.width() > wide and label.width() >= label.sizeHint().width()


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_rich_line_grows_and_never_asks_for_a_layout_otherwise(qtbot):
    """A new text in a RichLine repaints it; the panel around it is laid out again only when
    the text needs more height than the line has (and when its width changes)."""
    from PySide6.QtWidgets import QVBoxLayout

    from specviz.gui.stream.rich_line import RichLine

    panel = QWidget()
    qtbot.addWidget(panel)
    line = RichLine("<b>one</b> line", 10)
    box = QVBoxLayout(panel)
    box.addWidget(line)
    box.addStretch(1)
    panel.resize(300, 400)
    panel.show()
    qtbot.waitExposed(panel)
    qtbot.wait(20)  # the first layout (the line fitted to its width)
    layouts = LayoutCounter(panel)
    one = line.height()
    line.setText("another <i>short</i> line")
    qtbot.wait(5)
    assert line.text() == "another <i>short</i> line" and line.height() == one
    assert layouts.count == 0
    line.setText("a long line " * 30)  # wraps at 300 px: taller, the panel is laid out
    qtbot.wait(5)
    taller = line.height()
    assert taller > one and taller >= line.needed_height() and layouts.count >= 1
    before = layouts.count
    line.setText("short again")  # keeps its height: no layout
    qtbot.wait(5)
    assert line.height() == taller and layouts.count == before
    panel.resize(700, 400)  # a new width: the height fits the text again
    qtbot.wait(5)
    assert line.height() == line.needed_height() < taller


def test_the_app_leaves_a_core_for_the_window():
    """The in-thread engine's torch pool is one thread short of its default, so that the
    window's thread does not hold up the whole pool (process-wide: restored here)."""
    import torch

    from specviz.gui.app import leave_a_core_for_the_window

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert leave_a_core_for_the_window() == 2 and torch.get_num_threads() == 1
        assert leave_a_core_for_the_window() == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_noisy_and_dashed_curves_are_drawn_without_antialiasing(qtbot):
    """The app antialiases (gui.app); a dashed / dotted pen or a per-round series that jumps
    between 0 and 1 made a Step's plot paint 2.6x costlier late in a session with it. The
    running curves keep it."""
    import pyqtgraph as pg

    pg.setConfigOptions(antialias=True)
    try:
        plots = Plots()
        qtbot.addWidget(plots)
        plain = (plots.acceptance_round, plots.per_forward, plots.alpha_running,
                 plots.efficiency, plots.speedup_predicted, plots.speedup_leviathan)  # fmt: skip
        assert all(c.opts["antialias"] is False for c in plain)
        assert plots.acceptance_running.opts["antialias"] is True
        assert plots.speedup_measured.opts["antialias"] is True
    finally:
        pg.setConfigOptions(antialias=False)
