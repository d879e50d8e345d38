"""SPECVIZ_SMOKE_ROUNDS=N: the window, as started, runs its first session for N rounds (or
replays an opened trace to its end), says what it did in one line on stderr and closes.

The end-to-end tests start the app exactly as the README says (`python -m specviz ARGS`, its
default child-process engine) and read that line; an error dialog (SPECVIZ_NO_DIALOGS prints
it) or a failed load ends the run at once with a line that says so.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, QTimer

from specviz.gui.session.state import State

PREFIX = "specviz smoke:"


class SmokeRun(QObject):
    """Drives `window` (a MainWindow) on the GUI thread: Run once the models are loaded (or
    the trace is open), close after `rounds` rounds, at the session's end or on an error."""

    def __init__(self, window, rounds: int):
        super().__init__(window)
        self.window, self.wanted = window, max(1, rounds)
        self.started = self.done = False
        self.errors: list[str] = []
        controller = window.controller
        controller.state_changed.connect(self._on_state)
        controller.rounds_added.connect(self._on_rounds)
        controller.error.connect(lambda title, _message: self.errors.append(title))

    def _on_state(self, state: State) -> None:
        if self.done:
            return
        if state in (State.READY, State.REPLAY) and not self.started:
            self.started = True
            QTimer.singleShot(0, self._go)
        elif state is State.FINISHED or (state is State.REPLAY and self.started):
            self._finish("finished")
        elif state in (State.ERROR, State.NO_MODELS) and self.started or self.errors:
            self._finish("failed")

    def _go(self) -> None:
        """Run; a trace that opened with all its rounds shown has nothing to run."""
        if self.window.controller.replay_at_end:
            self._finish("finished")
        else:
            self.window.toggle_run()

    def _on_rounds(self, added) -> None:
        controller = self.window.controller
        if (
            not self.done
            and controller.state.live
            and len(controller.session.rounds) >= self.wanted
        ):
            controller.pause()
            self._finish("stopped")

    def _finish(self, how: str) -> None:
        self.done = True
        session = self.window.controller.session
        rounds = [] if session is None else session.rounds
        tokens = sum(1 for r in rounds for t in r.tokens if t.emitted)
        drafter = "-" if session is None else (session.header.drafter or {}).get("kind", "model")
        state = self.window.controller.state.value
        errors = f", errors: {'; '.join(self.errors)}" if self.errors else ""
        print(
            f"{PREFIX} {how} after {len(rounds)} rounds, {tokens} tokens, drafter {drafter}, "
            f"state {state}{errors}",
            file=sys.stderr,
            flush=True,
        )
        QTimer.singleShot(0, self.window.close_now)


def install(window, rounds: str | None) -> SmokeRun | None:
    """A SmokeRun on `window` when SPECVIZ_SMOKE_ROUNDS is set (its value: the rounds)."""
    return SmokeRun(window, int(rounds)) if rounds else None
