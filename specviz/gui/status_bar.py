"""The status bar: model pair, device, tokens/s, rounds, acceptance, state, busy indicator.
Figures come from core.metrics.running.RoundStats; the acceptance figure's tooltip lists
every metric of core.metrics.registry (RunningStats.metrics). GUI thread only."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QLabel, QProgressBar, QSizePolicy, QStatusBar, QWidget

from specviz.core.metrics.running import RoundStats

STATE_COLOURS = {
    "loading": "#8a6d00",
    "starting": "#8a6d00",
    "ready": "#1b7a2e",
    "running": "#1f5fbf",
    "paused": "#555555",
    "finished": "#1b7a2e",
    "error": "#c62828",
    "replay": "#8e44ad",
    "replaying": "#8e44ad",
    "no models": "#c62828",
}


def engine_words(engine) -> str:
    """Where the rounds are computed (the window's engine thread object, None: this
    process's own)."""
    if engine is None:
        return "engine: this process"
    address = getattr(engine, "address", None)
    return f"engine: serve at {address}" if address else "engine: child process"


REPLAY_ENGINE = "engine: none (replay)"  # a replay's rounds are read from its trace


# What a state means where its name alone does not say: the engine has no session (it failed,
# or a reconnect found a fresh server), so the next Step starts a new one.
STATE_WORDS = {"error": "error: Step starts anew"}
STATE_TIPS = {
    "error": "the engine has no session for the rounds shown (a round or a start failed, or a "
    "reconnect found a server that no longer has it); the rounds stay, and the next Step "
    "starts a new session from the prompt",
}


class Figure(QLabel):
    """A status-bar label whose width only grows. A label of fixed size changes its text
    without asking the window to lay itself out again (Qt skips the geometry update of a
    widget whose minimum and maximum sizes are equal), and most new texts (the next round's
    figures) are no wider than the widest so far: one relayout of the whole window per
    round, and a repaint of every label in the bar, become a repaint of the label."""

    def setText(self, text: str) -> None:
        super().setText(text)
        hint = self.sizeHint()
        if hint.width() > self.minimumWidth() or hint.height() != self.minimumHeight():
            self.setFixedSize(max(hint.width(), self.minimumWidth()), hint.height())


class ElidedFigure(Figure):
    """A Figure at most `max_width` wide: a longer text ends in "…", the whole of it is
    the tooltip's first line (a 1280-pixel window keeps its state and messages in view)."""

    def __init__(self, text: str = "", max_width: int = 420):
        super().__init__()
        self.max_width = max_width
        self.full_text = ""
        self._tip = ""
        self.setText(text)

    def setText(self, text: str) -> None:
        self.full_text = text
        shown = self.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, self.max_width)
        super().setText(shown)
        self._show_tip()

    def setToolTip(self, tip: str) -> None:
        self._tip = tip
        self._show_tip()

    def _show_tip(self) -> None:
        shown = self.text() != self.full_text
        super().setToolTip(
            "\n\n".join(t for t in (self.full_text if shown else "", self._tip) if t)
        )


class RoomFigure(QWidget):
    """Plain text in the room the bar's other figures leave, at most `max_width` wide: cut
    with "…" where the room is short (the whole text is then the tooltip's first line), so
    the figures after it (the state) stay in view at 1280 pixels. Its width only grows, as a
    Figure's: a new text repaints it without a relayout of the window."""

    def __init__(self, text: str = "", max_width: int = 420):
        super().__init__()
        self.max_width = max_width
        self.full_text = ""
        self._tip = ""
        self._hint = 0
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.setText(text)

    def text(self) -> str:
        """The text as shown (cut to the width; hidden: to the width it asks for)."""
        width = self.width() if self.isVisible() else self._hint
        return self.fontMetrics().elidedText(self.full_text, Qt.TextElideMode.ElideRight, width)

    def setText(self, text: str) -> None:
        self.full_text = text
        wanted = min(self.fontMetrics().horizontalAdvance(text) + 4, self.max_width)
        if wanted > self._hint:
            self._hint = wanted
            self.updateGeometry()
        self._show_tip()
        self.update()

    def setToolTip(self, tip: str) -> None:
        self._tip = tip
        self._show_tip()

    def _show_tip(self) -> None:
        cut = self.text() != self.full_text
        super().setToolTip("\n\n".join(t for t in (self.full_text if cut else "", self._tip) if t))

    def sizeHint(self) -> QSize:
        return QSize(self._hint, self.fontMetrics().height())

    def minimumSizeHint(self) -> QSize:
        return QSize(min(self._hint, self.fontMetrics().horizontalAdvance("0" * 6)),
                     self.fontMetrics().height())  # fmt: skip

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._show_tip()

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(self.rect(), Qt.AlignmentFlag.AlignVCenter, self.text())
        painter.end()


class StatusBar(QStatusBar):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.busy_label = QLabel()
        self.busy_bar = QProgressBar()
        self.busy_bar.setRange(0, 0)  # indeterminate
        self.busy_bar.setMaximumWidth(120)
        self.busy_bar.setMaximumHeight(14)
        self.busy_bar.hide()
        self.pair = ElidedFigure("no models", max_width=240)  # a trace's names can be long
        self.device = QLabel("")
        self.engine = QLabel("")  # where the rounds are computed (--engine, --connect)
        self._engine_words = ""
        self.speed = Figure("")
        self.rounds = Figure("")
        self.acceptance = Figure("")
        self.speedup = ElidedFigure("", max_width=260)  # the measured speedup: always shown
        # both predictions: in the room left (cut to fit, whole on hover), before the state
        self.cost = RoomFigure("", max_width=320)
        self.state = QLabel("")
        for label in (self.busy_label, self.pair, self.device, self.engine, self.speed,
                      self.rounds, self.acceptance, self.speedup):  # fmt: skip
            label.setTextFormat(Qt.TextFormat.PlainText)  # names from a trace: never markup
        # Permanent, so that a message (showMessage) never hides what is in progress.
        self.addPermanentWidget(self.busy_bar)
        self.addPermanentWidget(self.busy_label)
        for label in (self.pair, self.device, self.engine, self.speed, self.rounds,
                      self.acceptance, self.speedup, self.cost):  # fmt: skip
            self.addPermanentWidget(label)
        self.addPermanentWidget(self.state)
        # A message (showMessage) takes the room of the predictions and of what is loaded
        # (the pair, device, engine) while it shows: the bar's left part would otherwise be a
        # few pixels wide at 1280x720 and cut it ("Rur"). The live figures stay.
        self.messageChanged.connect(self._message_shown)
        self.set_figures(None, 0)

    def _message_shown(self, text: str) -> None:
        for label in (self.cost, self.pair, self.device, self.engine):
            label.setVisible(not text)

    def new_session(self, header, replay: bool) -> None:
        """A session (live or a replay's) starts: no figures yet; a replay has no engine."""
        self.set_figures(None, 0)
        self.set_speed(None)
        self.set_dtype(header)
        self.engine.setText(REPLAY_ENGINE if replay else self._engine_words)

    def set_busy(self, message: str) -> None:
        """What the worker is doing ("" when idle); runs on the GUI thread via a signal."""
        self.busy_label.setText(message)
        self.busy_bar.setVisible(bool(message))

    def set_pair(self, name: str, device: str) -> None:
        self.pair.setText(f"models: {name}")
        self.device.setText(f"device: {device}")
        self._device = device

    def set_dtype(self, header) -> None:
        """The session's dtype beside the device, and why on hover (--dtype auto's probe:
        core.models.dtype_probe; the header's dtype_choice)."""
        if header is None:
            return
        choice = header.dtype_choice or {}
        auto = " (auto)" if choice else ""
        self.device.setText(f"device: {getattr(self, '_device', '') or header.target.device}, "
                            f"{header.target.dtype}{auto}")  # fmt: skip
        why = choice.get("why")
        self.device.setToolTip(
            f"--dtype auto chose {header.target.dtype}: {why}" if isinstance(why, str)
            else f"The target's weights are in {header.target.dtype}."
        )  # fmt: skip

    def set_engine(self, words: str) -> None:
        self._engine_words = words
        self.engine.setText(words)
        self.engine.setToolTip(
            "Where the rounds are computed: a child process (the default, so that drawing "
            "does not slow the rounds it measures), this process (--engine thread), or a "
            "`specviz serve` (--connect); none in a replay (its rounds are read from the trace)"
        )

    def set_state(self, state: str) -> None:
        colour = STATE_COLOURS.get(state, "#333333")
        shown = STATE_WORDS.get(state, state)
        self.state.setText(f"<b style='color:{colour}'>{shown}</b>")
        self.state.setToolTip(
            f"state: {state}" + (f": {STATE_TIPS[state]}" if state in STATE_TIPS else "")
        )

    def set_figures(self, stats: RoundStats | None, rounds: int, running=None) -> None:
        """running: the session's RunningStats, whose metrics the acceptance tooltip lists."""

        def f(value, form):
            return "n/a" if value is None else form.format(value)

        self.rounds.setText(f"rounds: {rounds}")
        lines = running.metrics.lines() if running is not None else []
        self.acceptance.setToolTip("\n".join(["over the session so far:", *lines]) if lines
                                   else "")  # fmt: skip
        if stats is None:
            self.speed.setText("tokens/s: n/a")
            self.acceptance.setText("acceptance: n/a")
            return
        self.speed.setText(f"tokens/s: {f(stats.tokens_per_s, '{:.1f}')}")
        self.acceptance.setText(
            f"acceptance: {f(stats.acceptance_running, '{:.1%}')} \u00b7 "
            f"\u03b1 {f(stats.alpha_running, '{:.2f}')}"
        )

    def set_speed(self, point) -> None:
        """The cost model's figures (a metrics.speed_tracker.SpeedPoint, or None)."""
        from specviz.core.metrics.speed_tracker import window_text

        text, tip = window_text(point)
        speedup, _, predicted = text.partition(" \u00b7 ")  # "speedup ... · predicted ..."
        self.speedup.setText(speedup)
        self.speedup.setToolTip(tip)
        self.cost.setText(predicted)
        self.cost.setToolTip(tip)
