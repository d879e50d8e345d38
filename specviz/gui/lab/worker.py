"""The lab's Monte Carlo on its own thread: one QObject, created without a parent and moved
to a QThread; requests come in by a queued signal, results go out as signals."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QObject, Signal, Slot

from specviz.core.lab.montecarlo import MonteCarloResult, monte_carlo


@dataclass(frozen=True)
class LabRequest:
    """One Monte Carlo run. run_id lets the window drop results of a superseded run."""

    run_id: int
    p: np.ndarray  # [V]
    q: np.ndarray  # [V]
    n: int
    rule: str
    seed: int


class LabWorker(QObject):
    """Runs core.lab.montecarlo.monte_carlo. Signals are emitted on the worker thread."""

    progress = Signal(int, object)  # run_id, MonteCarloResult after each chunk
    finished = Signal(int, object)  # run_id, the final (or cancelled) MonteCarloResult
    failed = Signal(int, str)  # run_id, a readable message

    def __init__(self) -> None:
        super().__init__()  # no parent: a parented QObject cannot be moved to a thread
        self._cancel_upto = 0  # runs with an id at most this stop at the next chunk

    def cancel(self, run_id: int) -> None:
        """Stop run `run_id` and any earlier one (called from the GUI thread: one int
        store, read by the worker between chunks)."""
        self._cancel_upto = max(self._cancel_upto, run_id)

    @Slot(object)
    def run(self, request: LabRequest) -> None:
        """Worker thread: run the request, reporting each chunk."""
        run_id = request.run_id
        if run_id <= self._cancel_upto:
            return  # cancelled before it started

        def progress(result: MonteCarloResult) -> bool:
            self.progress.emit(run_id, result)
            return run_id > self._cancel_upto

        try:
            result = monte_carlo(
                request.p, request.q, request.n, request.rule, request.seed, progress=progress
            )
        except Exception as e:  # noqa: BLE001 - every failure reaches the window as text
            self.failed.emit(run_id, f"{type(e).__name__}: {e}")
            return
        self.finished.emit(run_id, result)
