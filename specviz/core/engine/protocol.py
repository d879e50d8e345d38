"""The Engine seam: what drives a session, wherever it runs.

Two implementations: core.host.session_host.SessionHost (the pair in this process) and
remote.client.RemoteEngine (a `specviz serve` elsewhere, or the window's child process).
`specviz run` and `run --connect` drive either through one loop (cli.session.session_loop), the
window through its one worker (gui.session.worker), a Tune sweep included. Every
method is called from one thread, the engine's owner; round records come back as the
trace's own values (core.trace.records.Round), so every view works on each.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from specviz.core.trace.records import Round, SessionHeader, Settings


@runtime_checkable
class Engine(Protocol):
    header: SessionHeader | None  # the session's, or None before the first start
    finished: bool  # the session has ended (max new tokens, end-of-text, context length)

    def start(
        self,
        prompt: str,
        settings: Settings,
        calibrate: bool = True,
        trace: bool = True,
        chat: bool | None = False,
        drafting: tuple | None = None,
    ) -> SessionHeader:
        """A new session (the previous one ends); ValueError for a prompt or settings the
        engine cannot take. chat: the prompt as a user turn of the target's chat template;
        None: so for an instruct target (core.models.chat), else the raw text."""
        ...

    def step(self) -> Round: ...

    def run(self, max_rounds: int | None = None) -> Iterator[Round]:
        """Rounds until the session finishes or max_rounds."""
        ...

    def pause(self) -> list[Round]:
        """Stop a run; the rounds already made and not yet handed out (a served engine may
        have computed ahead)."""
        ...

    def update_settings(self, settings: Settings) -> None: ...

    def continue_session(self, settings: Settings) -> None:
        """Go on after max new tokens or end-of-text; ValueError when the session cannot."""
        ...

    def remeasure(self) -> None:
        """A full cost-model probe after the next round."""
        ...

    def position(self, context_ids: list[int], settings: Settings, top_n: int = 20):
        """The full-vocabulary p and q after context_ids (core.lab.position), the session's
        drafter's q."""
        ...

    def greedy_check(self, prompt_ids: list[int], emitted: list[int]):
        """The target's own greedy decoding of prompt_ids against `emitted`
        (core.decoding.greedy_check.GreedyDiff), or None where they agree."""
        ...

    def sweep(self, prompts, config, cancel=None, on_run=None, trace_dir=None):
        """A K sweep (core.tune.sweep: core.tune.promptsets.Prompt items, a SweepConfig) on
        the engine's own models, beside its session (whose caches it leaves alone), on the
        calling thread: on_run(done, total, SweepRun) as each run finishes; a set `cancel`
        (threading.Event) stops it between two rounds, keeping the runs that finished;
        trace_dir (a folder here): each run's trace written there. A SweepResult."""
        ...

    def close(self) -> None: ...
