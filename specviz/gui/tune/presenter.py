"""The Tune panel opened from the main window (Tools > Tune K): the K advisor fed live with
the session's round records, Apply K into the controls, Re-measure to the engine, and a
sweep that pauses the session while it runs. GUI thread only."""

from __future__ import annotations

from collections.abc import Callable

from specviz.gui.screen_fit import fit_to_screen
from specviz.gui.session.controller import SessionController
from specviz.gui.setup.controls import Controls


class TunePresenter:
    """Opens the panel once (its own window) and keeps it fed while it exists."""

    def __init__(
        self,
        controller: SessionController,
        controls: Controls,
        open_trace: Callable[[str], object] | None = None,
    ):
        self.controller = controller
        self.controls = controls
        self.open_trace = open_trace  # the window's Files.open_trace: replay a trace file
        self.panel = None
        controller.rounds_added.connect(self._on_rounds)
        controller.session_reset.connect(lambda _header: self._reset())
        controller.models_changed.connect(self._on_models)
        controls.settings_changed.connect(self._on_settings)
        controls.drafting_box.changed.connect(self._on_drafting)

    def open(self) -> None:
        if self.panel is None:
            from specviz.gui.tune.panel import TunePanel

            self.panel = TunePanel()
            self.panel.setWindowTitle("specviz \u2014 tune K")
            fit_to_screen(self.panel, 900, 760)
            self.panel.apply_k.connect(self.controls.k_spin.setValue)  # from the next round
            self.panel.remeasure.connect(self.controller.remeasure)
            self.panel.sweep_running.connect(self._on_sweep)
            if self.open_trace is not None:  # a sweep run's trace: replayed in the window
                self.panel.open_trace.connect(self.open_trace)
            self._reset()
            self._on_settings(self.controls.settings())
            self._on_drafting(*self.controls.drafting())
            self._on_models(self.controller.models)
        self.panel.show()
        self.panel.raise_()

    def close(self) -> None:
        if self.panel is not None:
            self.panel.shutdown()
            self.panel.close()
            self.panel.deleteLater()
            self.panel = None

    def _reset(self) -> None:
        if self.panel is not None:
            session = self.controller.session
            self.panel.reset(list(session.rounds) if session is not None else ())

    def _on_rounds(self, added: list) -> None:
        if self.panel is not None:
            self.panel.add_rounds([rnd for rnd, _ in added])

    def _on_drafting(self, drafter, policy) -> None:
        """The sweep drafts as the session does (early exit sweeps early exit)."""
        if self.panel is not None:
            self.panel.set_drafting(drafter, policy)

    def _on_settings(self, settings) -> None:
        if self.panel is not None:
            self.panel.set_settings(settings)

    def _on_models(self, info) -> None:
        """A sweep is a job on the session's engine (engine.sweep), on its models wherever
        they are (this process, the child engine, a served one): loaded once; the sweep
        makes its own engines, never touching the session's caches."""
        if self.panel is not None and info is not None:
            self.panel.set_runner(self.controller.run_job)

    def _on_sweep(self, running: bool) -> None:
        if running:  # the two would slow each other's timings
            self.controller.pause()
            self.controller.message.emit(
                "The session is paused while Tune sweeps (the two would slow each other's "
                "timings); Run or Step goes on with it",
                10000,
            )
