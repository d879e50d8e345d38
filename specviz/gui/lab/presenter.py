"""The losslessness lab opened from the main window: it asks for the selected position and
gets full distributions from the models (live) or the stored top-N (a replay). GUI thread
only."""

from __future__ import annotations

from specviz.core.metrics.position_bars import position_bars
from specviz.core.trace.records import TraceError
from specviz.gui.distribution.view import DistributionView
from specviz.gui.session.controller import SessionController


class LabPresenter:
    """Opens the lab window once and answers its requests for the selected position."""

    def __init__(self, controller: SessionController, distribution: DistributionView):
        self.controller = controller
        self.distribution = distribution
        self.lab = None
        self._title: str | None = None
        controller.position_ready.connect(self._on_position_ready)

    def open(self) -> None:
        from specviz.gui.lab.window import LabWindow

        if self.lab is None:
            self.lab = LabWindow()
            self.lab.request_position.connect(self._wants_position)
        self.lab.show()
        self.lab.raise_()

    def close(self) -> None:
        if self.lab is not None:
            self.lab.close()
            self.lab = None

    def _say(self, text: str) -> None:
        self.lab.statusBar().showMessage(text, 6000)

    def _wants_position(self) -> None:
        session, selected = self.controller.session, self.distribution.selected
        if session is None or selected is None:
            self._say("select a token in the main window first")
            return
        round_index, position = selected
        title = f"round {round_index + 1}, position {position + 1} of the main window"
        if self.controller.request_position(round_index, position):
            self._title = title
            return
        try:
            bars = position_bars(session.details(round_index), position)
        except TraceError as e:  # a trace's top-N lists are parsed when first shown
            self._say(f"this position's stored lists: {e}")
            return
        if any(v is None for v in bars.p) or any(v is None for v in bars.q):
            self._say("this position stores only one of p and q: pick a judged token")
            return
        self.lab.set_stored_position(
            list(bars.p), list(bars.q), list(bars.labels), f"{title} (stored top-N)"
        )

    def _on_position_ready(self, result) -> None:
        if self.lab is not None:
            self.lab.set_position(result, self._title)
