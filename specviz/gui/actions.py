"""The window's actions, menus and toolbar, built in one place. GUI thread only."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu, QToolBar

from specviz.gui import keys
from specviz.gui.plots.round_plots import PLOTS, TITLES


@dataclass
class Actions:
    step: QAction
    run: QAction
    continue_: QAction
    reset: QAction
    new: QAction
    open: QAction
    export_trace: QAction
    export_csv: QAction
    quit: QAction
    lab: QAction
    tune: QAction
    remeasure: QAction
    greedy: QAction


def build_actions(window) -> Actions:
    """Create the actions of `window` (a MainWindow) and put them in menus and a toolbar."""

    def action(text: str, slot, shortcut=None, tip: str = "") -> QAction:
        a = QAction(text, window)
        if isinstance(shortcut, tuple):  # an F-key first (gui/keys.py)
            a.setShortcuts([QKeySequence(k) for k in shortcut])
        elif shortcut is not None:
            a.setShortcut(QKeySequence(shortcut))
        keys = " or ".join(k.toString() for k in a.shortcuts())
        a.setToolTip(f"{tip} ({keys})" if keys else tip)
        a.setStatusTip(tip)
        a.triggered.connect(slot)
        return a

    acts = Actions(
        step=action("Step", window.step, keys.STEP, "Run one draft-and-verify round"),
        run=action(
            "Run", window.toggle_run, keys.RUN, "Run rounds until paused, EOS or max tokens"
        ),
        continue_=action(
            "Continue", window.continue_session, keys.CONTINUE,
            "Go on after the session ended (more tokens, or past end-of-text)",
        ),
        reset=action(
            "Reset", window.reset, keys.RESET, "Start over (a replay rewinds to its first round)"
        ),
        new=action(
            "New session", window.new_session, QKeySequence.StandardKey.New, "Leave a replay"
        ),
        open=action(
            "Open trace\u2026", window.files.open_trace_dialog, QKeySequence.StandardKey.Open,
            "Replay a saved trace without models",
        ),
        export_trace=action(
            "Export trace\u2026", window.files.export_trace_dialog, QKeySequence.StandardKey.Save,
            "Save the whole session as a JSON Lines trace",
        ),
        export_csv=action(
            "Export statistics as CSV\u2026", window.files.export_csv_dialog, None,
            "Per-round statistics, one row per round",
        ),
        quit=action("Quit", window.close, QKeySequence.StandardKey.Quit, "Close specviz"),
        lab=None,
        tune=None,
        remeasure=action(
            "Re-measure costs", window.remeasure, None,
            "Probe T_t(n) and T_d(1) again after the next round (the speedup's baseline)",
        ),
        greedy=action(
            "Check greedy against the target alone\u2026", window.check_greedy, None,
            "Greedy sessions: run the target's own greedy decoding on the prompt and show "
            "the first differing token (none is expected)",
        ),
    )  # fmt: skip
    acts.run.setCheckable(True)

    bar = window.menuBar()
    file_menu = bar.addMenu("&File")
    for a in (acts.new, acts.open, acts.export_trace, acts.export_csv):
        file_menu.addAction(a)
    plot_menu = QMenu("Export plot", window)
    for name in (*PLOTS, "distribution"):
        for suffix in ("png", "svg"):
            plot_menu.addAction(
                f"{TITLES.get(name, 'Distribution panel')} as {suffix.upper()}\u2026",
                lambda n=name, s=suffix: window.files.export_plot_dialog(n, s),
            )
    file_menu.addMenu(plot_menu)
    file_menu.addSeparator()
    file_menu.addAction(acts.quit)

    session_menu = bar.addMenu("&Session")
    for a in (acts.step, acts.run, acts.continue_, acts.reset, acts.remeasure):
        session_menu.addAction(a)

    tools = bar.addMenu("&Tools")
    acts.lab = action("Losslessness lab\u2026", window.open_lab, None, "Verify the rule")
    tools.addAction(acts.lab)
    acts.tune = action(
        "Tune K\u2026", window.open_tune, None, "The K advisor from this session; a K sweep"
    )
    tools.addAction(acts.tune)
    tools.addAction(acts.greedy)
    tools.addAction(action(
        "Bench results\u2026", lambda: window.bench.open_dialog(), None,
        "Open a `specviz bench --json` file: bars per category with their intervals",
    ))  # fmt: skip
    from specviz.gui.bench.doctor_view import EngineMetrics

    # Held here, not in main_window (at its line limit): the session's stats as they are now
    window.engine_metrics = EngineMetrics(window, lambda: window.controller.stats)
    tools.addAction(action(
        "Engine metrics\u2026", window.engine_metrics.open_dialog, None,
        "Open a vLLM /metrics page or log, an SGLang or llama.cpp log (what `specviz doctor` "
        "reads): its acceptance in every definition, beside this session's",
    ))  # fmt: skip

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
