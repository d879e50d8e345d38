"""`specviz` with no command: the window.

Environment: SPECVIZ_QUIT_AFTER_MS=N closes the window after N ms (smoke tests,
screenshots); SPECVIZ_NO_DIALOGS=1 answers every question "no" and prints messages to
stderr instead of showing them; SPECVIZ_CACHE is where the autosave lives.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from . import dialogs


def _specs(args: argparse.Namespace) -> tuple[str, str] | None:
    """(target, draft) from the arguments, or the built-in default; None if there is none."""
    from ..commands.common import model_specs

    try:
        return model_specs(args)
    except ImportError:
        return None  # no built-in pairs in this installation


def _excepthook(window_ref: list) -> callable:
    def hook(kind, value, tb) -> None:
        traceback.print_exception(kind, value, tb)
        window = window_ref[0] if window_ref else None
        dialogs.error(
            window,
            "Internal error",
            f"{kind.__name__}: {value}\n\nThe session is kept; please report this with the "
            "text printed on the terminal.",
        )

    return hook


def main(args: argparse.Namespace | None = None) -> int:
    from ..commands.common import UsageError, fail

    args = args or argparse.Namespace()
    for name, default in (("target", None), ("draft", None), ("pair", None), ("trace", None),
                          ("device", "cpu"), ("dtype", "float32")):  # fmt: skip
        if not hasattr(args, name):
            setattr(args, name, default)
    try:
        specs = _specs(args)
    except UsageError as e:
        return fail(str(e))
    if os.environ.get("SPECVIZ_NO_DIALOGS"):
        dialogs.AUTO_ANSWER = False
        dialogs.ECHO = True

    pg.setConfigOptions(antialias=True, background="w", foreground="#222222")
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("specviz")
    from .main_window import MainWindow

    window = MainWindow(specs, device=args.device, dtype=args.dtype)
    screen = app.primaryScreen()
    if screen is not None:  # as large as the screen allows, up to 1600 x 1000
        room = screen.availableGeometry()
        window.resize(min(1600, room.width()), min(1000, room.height()))
        window.move(room.topLeft())
    previous_hook = sys.excepthook
    sys.excepthook = _excepthook([window])
    window.show()
    if specs is None:
        dialogs.error(
            window,
            "No built-in model pair",
            "This installation has no built-in model pair. Choose a target and a draft "
            "(hub id or folder) in the Models box and press Load, or open a trace (Ctrl+O).",
        )
    if args.trace:
        window.open_trace(args.trace)
    else:
        window.offer_restore()
    quit_after = os.environ.get("SPECVIZ_QUIT_AFTER_MS")
    if quit_after:
        QTimer.singleShot(int(quit_after), window.close_now)
    app.aboutToQuit.connect(window.shutdown)
    try:
        return app.exec()
    finally:
        window.shutdown()
        sys.excepthook = previous_hook
