"""The Tune panel opened from the main window (Tools > Tune K): the K advisor fed live with
the session's round records, Apply K into the controls, Re-measure to the engine, and a
sweep that pauses the session while it runs. GUI thread only."""

from __future__ import annotations

from collections.abc import Callable

from specviz.core.models.pair import LoadOptions
from specviz.core.models.spec import PairSpec
from specviz.gui.screen_fit import fit_to_screen
from specviz.gui.session.controller import SessionController
from specviz.gui.setup.controls import Controls
from specviz.gui.tune.sweep_job import on_own_copy


def served_sweep_message(address: str, info) -> str:
    """Why a window on a served engine does not sweep, and what to run instead."""
    pair = f"--target {info.target_spec}" + (
        f" --draft {info.draft_spec}" if info.draft_spec else ""
    )
    return (
        f"A sweep runs on the engine's models, in its process; this window drives the engine "
        f"of `specviz serve` at {address}. Run the sweep where the models are: `specviz tune "
        f"{pair} --k 1-8` (the advisor above still follows this session)."
    )


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
        """A sweep is a job on the session's engine, on its pair (loaded once; the sweep
        makes its own engines, never the session's caches). An engine in a child process
        of this window's: the sweep loads its own copy here. A served one (--connect):
        refused, saying what to run on that machine."""
        if self.panel is None or info is None:
            return
        engine = self.controller.engine
        if engine.link.runs_jobs:
            self.panel.set_runner(self.controller.run_job)
        elif engine.address is None:
            options = LoadOptions(device=info.device, dtype=info.target.dtype)
            spec = PairSpec(info.target_spec, info.draft_spec or None, options)
            self.panel.set_runner(on_own_copy(spec.load))
        else:
            self.panel.set_runner(None, served_sweep_message(engine.address, info))

    def _on_sweep(self, running: bool) -> None:
        if running:  # the two would slow each other's timings
            self.controller.pause()
            self.controller.message.emit(
                "The session is paused while Tune sweeps (the two would slow each other's "
                "timings); Run or Step goes on with it",
                10000,
            )
