"""The window's actions, menus and toolbar, built in one place. GUI thread only."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu, QToolBar

from .plots import PLOTS, TITLES


@dataclass
class Actions:
    step: QAction
    run: QAction
    reset: QAction
    new: QAction
    open: QAction
    export_trace: QAction
    export_csv: QAction
    quit: QAction
    lab: QAction | None


def lab_available() -> bool:
    """The losslessness lab window exists (written separately; hidden until it does)."""
    try:
        return importlib.util.find_spec("specviz.gui.lab_window") is not None
    except (ImportError, ValueError):
        return False


def build_actions(window) -> Actions:
    """Create the actions of `window` (a MainWindow) and put them in menus and a toolbar."""

    def action(text: str, slot, shortcut=None, tip: str = "") -> QAction:
        a = QAction(text, window)
        if shortcut is not None:
            a.setShortcut(QKeySequence(shortcut))
        a.setToolTip(f"{tip} ({a.shortcut().toString()})" if shortcut is not None else tip)
        a.setStatusTip(tip)
        a.triggered.connect(slot)
        return a

    acts = Actions(
        step=action("Step", window.step, "Space", "Run one draft-and-verify round"),
        run=action("Run", window.toggle_run, "R", "Run rounds until paused, EOS or max tokens"),
        reset=action(
            "Reset", window.reset, None, "Start over (a replay rewinds to its first round)"
        ),
        new=action(
            "New session", window.new_session, QKeySequence.StandardKey.New, "Leave a replay"
        ),
        open=action(
            "Open trace\u2026", window.open_trace_dialog, QKeySequence.StandardKey.Open,
            "Replay a saved trace without models",
        ),
        export_trace=action(
            "Export trace\u2026", window.export_trace_dialog, QKeySequence.StandardKey.Save,
            "Save the whole session as a JSON Lines trace",
        ),
        export_csv=action(
            "Export statistics as CSV\u2026", window.export_csv_dialog, None,
            "Per-round statistics, one row per round",
        ),
        quit=action("Quit", window.close, QKeySequence.StandardKey.Quit, "Close specviz"),
        lab=None,
    )  # fmt: skip
    acts.run.setCheckable(True)

    bar = window.menuBar()
    file_menu = bar.addMenu("&File")
    for a in (acts.new, acts.open, acts.export_trace, acts.export_csv):
        file_menu.addAction(a)
    plot_menu = QMenu("Export plot", window)
    for name in PLOTS:
        for suffix in ("png", "svg"):
            plot_menu.addAction(
                f"{TITLES[name]} as {suffix.upper()}\u2026",
                lambda n=name, s=suffix: window.export_plot_dialog(n, s),
            )
    file_menu.addMenu(plot_menu)
    file_menu.addSeparator()
    file_menu.addAction(acts.quit)

    session_menu = bar.addMenu("&Session")
    for a in (acts.step, acts.run, acts.reset):
        session_menu.addAction(a)

    if lab_available():
        tools = bar.addMenu("&Tools")
        acts.lab = action("Losslessness lab\u2026", window.open_lab, None, "Verify the rule")
        tools.addAction(acts.lab)

    toolbar = QToolBar("Session", window)
    toolbar.setObjectName("session-toolbar")
    toolbar.setMovable(False)
    for a in (acts.step, acts.run, acts.reset):
        toolbar.addAction(a)
    toolbar.addSeparator()
    for a in (acts.open, acts.export_trace):
        toolbar.addAction(a)
    if isinstance(window, QMainWindow):
        window.addToolBar(toolbar)
    return acts
