"""A K sweep as a job on the window's engine worker (gui.session.worker.EngineWorker.run_job):
on the worker's thread it asks the session's engine to sweep (core.engine.protocol.Engine's
sweep), so the sweep runs on the engine's own models, wherever they are: this process
(core.host.session_host.SessionHost), the window's child process or a served engine
(remote.client.RemoteEngine, the `sweep` op); the models are loaded once, and the sweep's
own engines never touch the session's caches. Progress and the result go out through three
callables, the Tune panel's signals (emitted on the engine's thread, queued to the panel).
Cancelling sets a threading.Event the sweep checks between rounds (an engine elsewhere is
told to pause); a closing window cancels it too."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from specviz.core.tune.promptsets import Prompt
from specviz.core.tune.sweep import SweepConfig


class SweepJob:
    """One sweep. A plain object (no QObject): whichever thread drops it last may."""

    def __init__(
        self,
        sweep_id: int,
        prompts: Sequence[Prompt],
        config: SweepConfig,
        trace_dir: str | None,
        progress: Callable[[int, int, int, object], None],  # sweep_id, done, total, SweepRun
        finished: Callable[[int, object], None],  # sweep_id, SweepResult (cancelled or not)
        failed: Callable[[int, str], None],  # sweep_id, a readable message
    ):
        self.sweep_id, self.prompts, self.config, self.trace_dir = (
            sweep_id, prompts, config, trace_dir
        )  # fmt: skip
        self.progress, self.finished, self.failed = progress, finished, failed
        self.cancel_event = threading.Event()

    def cancel(self) -> None:
        """Any thread: stop the sweep after its current round."""
        self.cancel_event.set()

    def __call__(self, engine) -> None:
        """The engine's thread: the engine (core.engine.protocol.Engine) sweeps, each run
        reported as it finishes; None (no models loaded yet): refused, saying so."""
        sweep_id = self.sweep_id
        if engine is None:
            self.failed(sweep_id, "no models to sweep with: load a model pair first")
            return
        try:
            result = engine.sweep(
                self.prompts,
                self.config,
                self.cancel_event,
                lambda done, total, run: self.progress(sweep_id, done, total, run),
                self.trace_dir,
            )
        except Exception as e:  # noqa: BLE001 - every failure reaches the panel as text
            self.failed(sweep_id, f"{type(e).__name__}: {e}")
            return
        self.finished(sweep_id, result)
