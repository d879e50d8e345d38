"""A K sweep on its own thread: one QObject, created without a parent and moved to a
QThread; the request comes in by a queued signal, progress and the result go out as signals.
Cancelling sets a threading.Event the sweep checks between rounds."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal, Slot

from specviz.core.tune.promptsets import Prompt
from specviz.core.tune.sweep import SweepConfig, run_sweep


@dataclass(frozen=True)
class SweepRequest:
    """One sweep. pair_source is called on the worker thread for the ModelPair to use."""

    sweep_id: int
    pair_source: Callable[[], object]
    prompts: Sequence[Prompt]
    config: SweepConfig
    trace_dir: str | None = None  # each run's trace is written there (core.tune.sweep)


class SweepWorker(QObject):
    """Runs core.tune.sweep.run_sweep. Signals are emitted on the worker thread."""

    progress = Signal(int, int, int, object)  # sweep_id, done, total, SweepRun
    finished = Signal(int, object)  # sweep_id, SweepResult (cancelled or complete)
    failed = Signal(int, str)  # sweep_id, a readable message

    def __init__(self) -> None:
        super().__init__()  # no parent: a parented QObject cannot be moved to a thread
        self.cancel_event = threading.Event()

    def cancel(self) -> None:
        """Any thread: stop the sweep in progress after its current round."""
        self.cancel_event.set()

    @Slot(object)
    def run(self, request: SweepRequest) -> None:
        """Worker thread: load (or get) the pair, run the sweep, report each run."""
        sweep_id = request.sweep_id
        self.cancel_event.clear()
        try:
            pair = request.pair_source()
            result = run_sweep(
                pair,
                request.prompts,
                request.config,
                self.cancel_event,
                lambda done, total, run: self.progress.emit(sweep_id, done, total, run),
                request.trace_dir,
            )
        except Exception as e:  # noqa: BLE001 - every failure reaches the panel as text
            self.failed.emit(sweep_id, f"{type(e).__name__}: {e}")
            return
        self.finished.emit(sweep_id, result)
