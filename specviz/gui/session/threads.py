"""A worker QObject on its own started QThread (the lab's Monte Carlo and sequence
comparison: gui/lab). The worker must have no parent: a parented QObject silently fails to
move. (A Tune sweep is a job on the engine's worker, or loads its own pair on a plain thread:
gui/tune/sweep_job.py.)"""

from __future__ import annotations

from typing import TypeVar

from PySide6.QtCore import QObject, QThread

W = TypeVar("W", bound=QObject)


def start_worker(worker: W, name: str) -> tuple[W, QThread]:
    """Move `worker` to a new thread called `name` and start it; the worker is deleted when
    the thread finishes. Stop it with thread.quit() and thread.wait()."""
    thread = QThread()
    thread.setObjectName(name)
    worker.moveToThread(thread)
    thread.finished.connect(worker.deleteLater)
    thread.start()
    return worker, thread
