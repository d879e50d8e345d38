"""`specviz` with no command: the window.

Environment: SPECVIZ_QUIT_AFTER_MS=N closes the window after N ms (smoke tests,
screenshots); SPECVIZ_NO_DIALOGS=1 answers every question "no" and prints messages to
stderr instead of showing them; SPECVIZ_CACHE is where the autosave lives.
"""

from __future__ import annotations

import os
import sys
import traceback

import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from specviz.gui import dialogs, screen_fit
from specviz.gui.qtfixes import gcguard, refguard


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


def _application() -> QApplication:
    refguard.install()  # before the first few thousand Qt calls
    pg.setConfigOptions(antialias=True, background="w", foreground="#222222")
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("specviz")
    gcguard.install()  # before the first engine thread starts
    return app


def leave_a_core_for_the_window() -> int:
    """Give the in-thread engine one torch thread fewer than the cores torch would use (at
    least one); returns the number before. With every core in torch's pool, each stretch of
    work on the window's thread (a paint, a frame) holds up the whole pool at its next
    barrier: on 2 cores the window kept 0.35 of the headless tokens/s with 2 threads and 0.57
    with 1 (benchmarks/gui_redraw.py measures both, interleaved). Process-wide: the lab and
    the Tune panel's sweeps use the same pool."""
    import torch

    before = torch.get_num_threads()
    if before > 1:
        torch.set_num_threads(before - 1)
    return before


def main(
    specs: tuple[str, str] | None,
    device: str = "cpu",
    dtype: str = "float32",
    trace: str | None = None,
    drafting=None,
    load_options=None,
    connect: str | None = None,
    token: str | None = None,
    engine: str = "process",
    threads: int | None = None,
    load: bool = True,
    settings=None,
    prompt: str | None = None,
    chat: bool | None = None,
) -> int:
    """Open the window on a model pair (None: this installation has no built-in pair) and,
    if given, a trace to replay; return when it closes. drafting: (DrafterConfig,
    PolicyConfig); load_options: core.models.load_options.LoadOptions; connect: HOST:PORT of a
    `specviz serve` (its models, with `token`); engine "process": the pair in a child process;
    threads: the engine's torch threads (default: one per core but one); load=False: the
    Models box shows specs without loading them (a trace opened alone needs no models);
    settings, prompt, chat: the Setup panel's values to start with (the command line's;
    chat None: on for an instruct target)."""
    if os.environ.get("SPECVIZ_NO_DIALOGS"):
        dialogs.AUTO_ANSWER = False
        dialogs.ECHO = True
    app = _application()
    from specviz.gui.main_window import MainWindow

    worker = None
    if connect or engine == "process":
        from specviz.gui.session.remote_link import remote_engine_thread

        worker = remote_engine_thread(connect, token)  # no address: a child process
        worker.link.child_threads = threads
        if connect:
            specs = (f"specviz serve at {connect}",) * 2  # the server says which pair
    elif threads is not None:
        import torch

        torch.set_num_threads(threads)
    else:
        leave_a_core_for_the_window()  # the engine runs in this process
    window = MainWindow(
        specs, device=device, dtype=dtype, engine=worker, drafting=drafting,
        load_options=load_options, load=load,
    )  # fmt: skip
    if settings is not None:
        window.controls.set_settings(settings)
    if prompt is not None:
        window.controls.set_prompt(prompt)
    if chat is not None:
        window.controls.set_chat(chat, given=True)
    previous_hook = sys.excepthook
    sys.excepthook = _excepthook([window])
    # 1920 x 1200 with its frame inside the screen, or maximized on a smaller screen
    screen_fit.show_fitted(window, 1920, 1200)
    if not load and specs is not None:
        window.status.showMessage(
            "The models are not loaded: a replay needs none (Load starts a live session)", 15000
        )
    if specs is None and not trace:
        dialogs.error(
            window,
            "No built-in model pair",
            "This installation has no built-in model pair. Choose a target and a draft "
            "(hub id or folder) in the Models box and press Load, or open a trace (Ctrl+O).",
        )
    from specviz.gui import smoke

    smoke.install(window, os.environ.get("SPECVIZ_SMOKE_ROUNDS"))  # before the trace opens
    if trace:
        window.files.open_trace(trace)
    else:
        window.files.offer_restore()
    quit_after = os.environ.get("SPECVIZ_QUIT_AFTER_MS")
    if quit_after:
        QTimer.singleShot(int(quit_after), window.close_now)
    app.aboutToQuit.connect(window.shutdown)
    try:
        return app.exec()
    finally:
        window.shutdown()
        sys.excepthook = previous_hook


def open_lab(request) -> int:
    """`specviz lab --gui`: the lab window on what the command prepared (`request` has p, q,
    labels, title and position: a model position, numbers given, or neither for the seeds'
    example); return when it closes."""
    app = _application()
    from specviz.gui.lab.window import LabWindow

    window = LabWindow()
    if request.position is not None:
        window.set_position(request.position, request.title)
    elif request.given:
        window.set_distributions(request.p, request.q, request.labels, request.title)
    window.show()
    quit_after = os.environ.get("SPECVIZ_QUIT_AFTER_MS")
    if quit_after:
        QTimer.singleShot(int(quit_after), window.close)
    return app.exec()
