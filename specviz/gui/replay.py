"""Replay of a loaded trace in the main window: no models, the same views as a live
session. A long trace is drawn in slices between events, so the window stays responsive
and says how far it got. A mixin of MainWindow; GUI thread only."""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer

from ..core.session import Session

REPLAY_INTERVAL_MS = 80  # pace of Run in a replay
SLICE_S = 0.05  # drawing a long trace: at most this long between two event-loop turns
DRAW_BATCH = 200  # rounds added to the stream in one edit (one layout) while drawing


class ReplayMixin:
    """Needs from the window: session, replay_source, running, exported, controls, status,
    _begin_session, _show_round, _add_rounds, _refresh, _set_state, select_round, last_stats."""

    def init_replay(self) -> None:
        self._replay_timer = QTimer(self)
        self._replay_timer.setInterval(REPLAY_INTERVAL_MS)
        self._replay_timer.timeout.connect(self._replay_tick)
        self._draw_until = 0  # a long trace is drawn up to this many rounds

    def show_replay(self, source: Session) -> None:
        """Show a loaded trace, all of its rounds, in replay mode."""
        self.running = False
        self._replay_timer.stop()
        self.replay_source = source
        self.exported = True
        self._begin_session(source.rewound())  # its lines: top-N lists, export as read
        self.controls.set_settings(source.header.settings)
        self.controls.prompt_edit.blockSignals(True)
        self.controls.set_prompt(source.header.prompt)
        self.controls.prompt_edit.blockSignals(False)
        t, d = source.header.target, source.header.draft
        self.status.set_pair(t.name if t.name == d.name else f"{t.name} + {d.name}", t.device)
        self._set_state("replay")
        self._draw_until = len(source.rounds)
        self._draw_slice()

    @property
    def drawing(self) -> bool:
        """A long trace is still being drawn."""
        return self.session is not None and len(self.session.rounds) < self._draw_until

    def _draw_slice(self) -> None:
        """Draw stored rounds for SLICE_S, then let the window breathe and come back."""
        source, shown = self.replay_source, self.session
        if source is None or shown is None:
            return
        start = time.perf_counter()
        while (done := len(shown.rounds)) < self._draw_until:
            self._add_rounds(source.rounds[done : min(done + DRAW_BATCH, self._draw_until)])
            done, total = len(shown.rounds), self._draw_until
            if done < total and time.perf_counter() - start > SLICE_S:
                # more to draw: come back after the window breathes. (Once the last round is
                # in, `drawing` is False, so the plots and the selection must follow now.)
                self.status.set_busy(f"drawing round {done:,} of {total:,}")
                self.status.set_figures(self.last_stats, done)  # the figures so far
                QTimer.singleShot(0, self._draw_slice)
                return
        self.status.set_busy("")
        self.plots.redraw()
        if shown.rounds:
            self.status.set_figures(self.last_stats, len(shown.rounds))
            self.select_round(len(shown.rounds) - 1)

    def _replay_step(self) -> bool:
        """Show the next stored round (Step in a replay); False at the end."""
        source, shown = self.replay_source, self.session
        if self.drawing:
            return False
        if source is None or shown is None or len(shown.rounds) >= len(source.rounds):
            self._replay_timer.stop()
            self._refresh()
            self._set_state("replay")
            return False
        self._show_round(source.rounds[len(shown.rounds)])
        return True

    def _replay_tick(self) -> None:
        if not self._replay_step():
            self._replay_timer.stop()

    def rewind(self) -> None:
        """Back to before the first round of the replay (Reset in a replay)."""
        self._replay_timer.stop()
        self._draw_until = 0
        self.status.set_busy("")
        self._begin_session(self.replay_source.rewound())
        self._set_state("replay")
