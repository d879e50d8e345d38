"""A loaded trace in the window: SessionController's replay, as a mixin (its state, its
signals and add_rounds are the controller's). All of a trace's rounds are drawn at once, in
slices that let the window breathe; Step and Run then go through them again after a Reset.
GUI thread only.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer

from specviz.core.trace.session import Session
from specviz.gui.session.state import State

SLICE_S = 0.05  # drawing a long trace: at most this long between two event-loop turns
DRAW_BATCH = 200  # rounds handed to the views in one signal while drawing a long trace


class ReplayMixin:
    """The replay half of SessionController (replay_source, replay_name, _draw_until and
    _replay_timer are set up by its __init__)."""

    @property
    def replay_at_end(self) -> bool:
        """A replay shows every round of its trace (Step and Run have nothing left)."""
        source, shown = self.replay_source, self.session
        return source is not None and shown is not None and len(shown.rounds) >= len(source.rounds)

    def show_replay(self, source: Session, exported: bool = True, name: str | None = None) -> None:
        """Show a loaded trace, all of its rounds, in replay mode; name: its file's."""
        self._replay_timer.stop()
        self.replay_source = source
        self.replay_name = name
        self.exported = exported
        t, d = source.header.target, source.header.draft
        self.pair_changed.emit(t.name if t.name == d.name else f"{t.name} + {d.name}", t.device)
        self._begin(source.rewound())  # its lines: top-N lists, export as read
        self._set_state(State.REPLAY)
        self._draw_until = len(source.rounds)
        self._draw_slice()

    def _draw_slice(self) -> None:
        """Hand stored rounds to the views for SLICE_S, then let the window breathe."""
        source, shown = self.replay_source, self.session
        if source is None or shown is None:
            return
        start = time.perf_counter()
        while (done := len(shown.rounds)) < self._draw_until:
            end = min(done + DRAW_BATCH, self._draw_until)
            if end < self._draw_until:
                self.busy.emit(f"drawing round {end:,} of {self._draw_until:,}")
            else:
                self.busy.emit("")
            self.add_rounds(source.rounds[done:end])
            if self.drawing and time.perf_counter() - start > SLICE_S:
                QTimer.singleShot(0, self._draw_slice)
                return
        self.busy.emit("")

    def _replay_step(self) -> bool:
        """Show the next stored round (Step in a replay); False at the end."""
        source, shown = self.replay_source, self.session
        if self.drawing or source is None or shown is None:
            return False
        if len(shown.rounds) >= len(source.rounds):
            self._replay_timer.stop()
            self._set_state(State.REPLAY)
            return False
        self.add_rounds((source.rounds[len(shown.rounds)],))
        return True

    def _replay_tick(self) -> None:
        if not self._replay_step():
            self._replay_timer.stop()
            self._set_state(State.REPLAY)
