"""A K sweep as a job on the window's engine worker (gui.session.worker.EngineWorker.run_job):
it runs on the engine's thread, on the session's own pair, so the models are loaded once
(core.tune.sweep.run_sweep makes its own engines: the session's caches are not shared).
Progress and the result go out through three callables, the Tune panel's signals (emitted
on the engine's thread, queued to the panel). Cancelling sets a threading.Event the sweep
checks between rounds; a closing window cancels it too."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from specviz.core.tune.promptsets import Prompt
from specviz.core.tune.sweep import SweepConfig, run_sweep


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

    def refuse(self, why: str) -> None:
        """The engine cannot run it (its models are elsewhere)."""
        self.failed(self.sweep_id, why)

    def __call__(self, pair) -> None:
        """The engine's thread: run the sweep on `pair`, reporting each run."""
        sweep_id = self.sweep_id
        try:
            result = run_sweep(
                pair,
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


def on_own_copy(load: Callable[[], object]) -> Callable[[SweepJob], None]:
    """A runner for a window whose engine is a child process of its own (--engine process,
    the default): each sweep loads its own copy of the pair (`load`, a
    core.models.spec.PairSpec's) in this process, on a thread of its own, and runs there."""

    def run_job(job: SweepJob) -> None:
        def load_and_run() -> None:
            try:
                pair = load()
            except Exception as e:  # noqa: BLE001 - every failure reaches the panel as text
                job.failed(job.sweep_id, f"could not load the pair: {type(e).__name__}: {e}")
                return
            job(pair)

        threading.Thread(target=load_and_run, name="specviz-sweep", daemon=True).start()

    return run_job
