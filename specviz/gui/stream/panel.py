"""The token stream with its legend above and the round slider below. GUI thread only."""

from __future__ import annotations

import html
from collections.abc import Sequence

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSlider,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from specviz.core.trace import verifiers
from specviz.core.trace.records import Round, Settings, drafter_notes
from specviz.core.trace.verifiers import LOSSY_WARNING
from specviz.gui import keys, palette
from specviz.gui.stream.cut_view import CutView
from specviz.gui.stream.rich_line import RichLine
from specviz.gui.stream.token_view import TokenView, k_text


def round_text(rnd: Round, total: int) -> str:
    s = rnd.settings
    k = html.escape(k_text(rnd))  # a trace's strings: never markup
    sampling = (f" \u00b7 {k}" if k else "") + ("" if s is None else f" \u00b7 T {s.temperature:g}")
    reason = html.escape(rnd.finish_reason or "")  # a trace's string: never markup
    end = f" \u00b7 finished: {reason}" if rnd.finish_reason else ""
    if rnd.greedy_diff is not None:  # the first token where the text left the target alone's
        end += f" \u00b7 leaves the target alone's text at token {rnd.greedy_diff.position + 1}"
    return (
        f"<b>Round {rnd.index + 1} / {total}</b> \u00b7 drafted {rnd.n_drafted} \u00b7 "
        f"accepted {rnd.n_accepted} \u00b7 emitted {rnd.n_emitted} \u00b7 "
        f"draft {rnd.draft_ms:.1f} ms \u00b7 verify {rnd.verify_ms:.1f} ms{sampling}{end}"
    )


def _may_keep_beyond(settings: Settings | None) -> bool:
    """A rule other than token-wise: it may keep drafts beyond the token-wise stop."""
    return settings is not None and not verifiers.token_fates(settings.verifier)


NO_ROUNDS = f"No rounds yet: type a prompt and press Step ({keys.STEP[0]})."
NO_ROUNDS_YET = f"No rounds yet: press Step ({keys.STEP[0]}) or Run ({keys.RUN[0]})."

ENDS = {
    "max_new_tokens": "it reached the maximum number of new tokens",
    "eos": "the target emitted end-of-text",
    "context_length": "the models' context length is full",
}


class LossyBanner(QLabel):
    """A standing banner while the session has a round verified by a lossy rule (trace
    Settings.lossy): its output is not the target's distribution."""

    area: BannerArea | None = None  # the room it is shown in, if any

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("lossy-banner")
        self.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self._notes: list[str] = []
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setWordWrap(True)
        border = palette.fate("rejected").foreground
        self.setStyleSheet(
            f"#lossy-banner {{ background: {palette.PROMPT_BACKGROUND}; padding: 4px; "
            f"border: 2px solid {border}; border-radius: 4px; }}"
        )
        self.hide()

    def note(self, settings: Settings | None, notes: list[str] | None = None) -> None:
        """Show the banner for a lossy session and for the drafter's warnings (kept until
        clear()); `notes` None keeps the session's."""
        if notes is not None:
            self._notes = list(notes)
        lines = [f"The drafter: {n}" for n in self._notes]
        if settings is not None and settings.lossy:
            warning = LOSSY_WARNING.format(rule=settings.verifier)
            lossy = (
                f"{warning[0].upper()}{warning[1:]}: this rule does not reproduce "
                "the target's distribution, whatever the acceptance figures say."
            )
            lines.insert(0, lossy)
        if lines:
            self.setText("\n".join(lines))
            self.show()
            if self.area is not None:
                self.area.fit()

    def clear(self) -> None:
        self._notes = []
        self.hide()

    def setVisible(self, visible: bool) -> None:  # noqa: N802 (Qt's name)
        super().setVisible(visible)
        if self.area is not None:
            self.area.setVisible(visible)


class BannerArea(QScrollArea):
    """A banner's room: as tall as its wrapped text up to MAX_LINES lines, the rest scrolled,
    so a long drafter warning is neither cut off unseen nor takes the stream's room at
    1280x720. Shown while the banner is."""

    MAX_LINES = 4

    def __init__(self, banner: LossyBanner, parent: QWidget | None = None):
        super().__init__(parent)
        self.banner = banner
        self.setWidget(banner)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        banner.area = self
        banner.setVisible(False)

    def fit(self) -> None:
        """Height for the banner's text at the present width, at most MAX_LINES lines."""
        width = max(self.viewport().width(), 100)
        most = self.banner.fontMetrics().lineSpacing() * self.MAX_LINES + 24  # padding, border
        needed = self.banner.heightForWidth(width)  # -1 with no text to lay out
        self.setFixedHeight(min(needed if needed > 0 else self.banner.sizeHint().height(), most))

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self.fit()


class GreedyNote(LossyBanner):
    """A standing note while a greedy half-precision session's text has left the target
    alone's greedy decoding (a Round's greedy_diff): where, the two tokens, the margin."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("greedy-note")
        self.setStyleSheet(
            f"#greedy-note {{ background: {palette.PROMPT_BACKGROUND}; padding: 4px; "
            f"border: 1px solid {palette.fate('resampled').foreground}; border-radius: 4px; }}"
        )
        self.setWordWrap(False)
        self.dtype: str | None = None

    def note(self, rounds: Sequence[Round]) -> None:  # type: ignore[override]
        """One line (the stream keeps its room at 1280x720); the whole reason on hover."""
        for rnd in rounds:
            if (diff := rnd.greedy_diff) is not None:
                text = diff.text(self.dtype)
                margin = diff.logit_theirs - diff.logit_ours
                self.setText(
                    f"Round {rnd.index + 1}: the text leaves the target alone's greedy text at "
                    f"token {diff.position + 1} (logits {margin:.3g} apart; hover for why)"
                )
                self.setToolTip(f"Round {rnd.index + 1}: {text[0].upper()}{text[1:]}.")
                self.show()


class EndBanner(QFrame):
    """Where the eye is when a session ends: why, and what can follow."""

    continue_requested = Signal()
    new_requested = Signal()
    rewind_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("end-banner")
        self.text = QLabel()
        self.text.setTextFormat(Qt.TextFormat.PlainText)
        self.text.setWordWrap(True)
        self.continue_button = QPushButton("Continue")
        self.continue_button.clicked.connect(self.continue_requested)
        self.new_button = QPushButton("New session")
        self.new_button.setToolTip("Start again from the prompt (Step after this)")
        self.new_button.clicked.connect(self.new_requested)
        self.rewind_button = QPushButton("Replay from the start")
        self.rewind_button.setToolTip("Rewind to before the first round (Reset), then Step / Run")
        self.rewind_button.clicked.connect(self.rewind_requested)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 8, 4)
        row.addWidget(self.text, 1)
        row.addWidget(self.continue_button)
        row.addWidget(self.rewind_button)
        row.addWidget(self.new_button)
        self._unflash = QTimer(self)  # a child: it dies with the banner
        self._unflash.setSingleShot(True)
        self._unflash.setInterval(1200)
        self._unflash.timeout.connect(lambda: self._style(False))
        self._style(False)
        self.hide()

    def _style(self, strong: bool) -> None:
        border = palette.fate("rejected").foreground if strong else palette.BOUNDARY
        self.setStyleSheet(
            f"#end-banner {{ background: {palette.PROMPT_BACKGROUND}; "
            f"border: 2px solid {border}; border-radius: 4px; }}"
        )

    def show_replay_end(self, name: str | None, rounds: int, reason: str | None) -> None:
        """The last round of a replayed trace is shown: say so, and what can follow."""
        ended = f" (the session ended: {ENDS.get(reason, reason)})" if reason else ""
        what = f"the trace {name}" if name else "the trace"
        self.text.setText(f"End of {what}: all {rounds:,} rounds are shown{ended}.")
        self.continue_button.hide()
        self.rewind_button.show()
        self.new_button.setText("Leave the replay")
        self.new_button.setToolTip("Back to a live session with the loaded models")
        self.show()

    def show_end(self, reason: str | None) -> None:
        """Show why the session ended; Continue where it can go on."""
        self.rewind_button.hide()
        self.new_button.setText("New session")
        self.new_button.setToolTip("Start again from the prompt (Step after this)")
        self.text.setText(f"The session has ended: {ENDS.get(reason, reason)}.")
        can_go_on = reason in ("max_new_tokens", "eos")
        self.continue_button.setVisible(can_go_on)
        self.continue_button.setText(
            "Continue past end-of-text" if reason == "eos" else "Continue with more tokens"
        )
        self.continue_button.setToolTip(
            ("Ignore end-of-text from now on and go on"
             if reason == "eos" else "Raise max new tokens by as many again and go on")
            + f" ({keys.CONTINUE})"
        )  # fmt: skip
        self.show()

    def flash(self) -> None:
        """Draw the eye to the banner (Step or Run pressed after the end)."""
        self._style(True)
        self._unflash.start()


class ModeSwitch(QWidget):
    """Two buttons beside the stream, one of them down: Rounds (the coloured stream) or
    Output (the emitted text alone, View > Output only)."""

    output_only_requested = Signal(bool)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.rounds_button = QToolButton()
        self.rounds_button.setText("Rounds")
        self.rounds_button.setToolTip("Every round's drafts, coloured by their fate")
        self.output_button = QToolButton()
        self.output_button.setText("Output")
        self.output_button.setToolTip("The text the session emitted, without the drafts (Ctrl+T)")
        self.group = QButtonGroup(self)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        for button in (self.rounds_button, self.output_button):
            button.setCheckable(True)
            self.group.addButton(button)
            row.addWidget(button)
        self.rounds_button.setChecked(True)
        self.output_button.toggled.connect(self.output_only_requested)

    def show_output_only(self, on: bool) -> None:
        """Put the right button down without asking for the change again."""
        self.output_button.blockSignals(True)
        (self.output_button if on else self.rounds_button).setChecked(True)
        self.output_button.blockSignals(False)


class StreamPanel(QWidget):
    """Legend, TokenView and the round slider. round_chosen(index) when the user moves it."""

    round_chosen = Signal(int)
    follow_requested = Signal()  # "Follow the latest round" after an older one was chosen
    output_only_requested = Signal(bool)  # the Rounds / Output switch (View > Output only)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._beyond = False  # the legend names the dotted "kept beyond" mark
        self.legend = QLabel(palette.fate_legend_html())
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setWordWrap(True)
        self.legend.setToolTip(
            "<br>".join(f"<b>{f.label}</b>: {f.meaning}" for f in palette.FATES.values())
        )
        self.view = TokenView()
        self.mode = ModeSwitch()
        self.mode.output_only_requested.connect(self.output_only_requested)
        # View > Output only: the emitted text alone (prompt and kept tokens, no drafts)
        self.output = QPlainTextEdit()
        self.output.setReadOnly(True)
        self.output.hide()
        self.banner = EndBanner()
        self.lossy = LossyBanner()
        self.greedy = GreedyNote()
        self._total = 0  # rounds in the session (a replay: in the trace)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, 0)
        self.slider.setEnabled(False)
        self.slider.setToolTip("Go back to any round to inspect it (also while running)")
        self.slider.valueChanged.connect(self._slider_moved)
        self.prev_button = QToolButton()
        self.prev_button.setText("\u25c0")
        self.prev_button.setToolTip("Previous round")
        self.prev_button.clicked.connect(lambda: self.slider.setValue(self.slider.value() - 1))
        self.next_button = QToolButton()
        self.next_button.setText("\u25b6")
        self.next_button.setToolTip("Next round")
        self.next_button.clicked.connect(lambda: self.slider.setValue(self.slider.value() + 1))
        # word-wrapped (a long line must not widen the window); a new round's line repaints
        # it without laying the window out again (gui/stream/rich_line.py)
        self.round_label = RichLine(NO_ROUNDS)
        self.cuts = CutView()  # a bridged draft's own cut of the round's drafts
        row = QHBoxLayout()
        row.addWidget(QLabel("Round"))
        row.addWidget(self.prev_button)
        row.addWidget(self.slider, 1)
        row.addWidget(self.next_button)
        self.follow_button = QPushButton("Follow the latest")
        self.follow_button.setToolTip(
            "An older round is shown: show each new round again as it arrives"
        )
        self.follow_button.clicked.connect(self.follow_requested)
        self.follow_button.hide()
        row.addWidget(self.follow_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        top = QHBoxLayout()
        top.addWidget(self.legend, 1)
        top.addWidget(self.mode, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(top)
        layout.addWidget(BannerArea(self.lossy))
        layout.addWidget(self.greedy)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.output, 1)
        layout.addWidget(self.banner)
        layout.addLayout(row)
        layout.addWidget(self.round_label)
        layout.addWidget(self.cuts)

    def set_output_only(self, on: bool, text: str = "") -> None:
        """Show the emitted text alone in place of the coloured stream (or the stream)."""
        self.view.setVisible(not on)
        self.output.setVisible(on)
        self.legend.setVisible(not on)
        self.mode.show_output_only(on)
        if on:
            self.set_output_text(text)

    def set_output_text(self, text: str) -> None:
        if self.output.isVisible() and self.output.toPlainText() != text:
            self.output.setPlainText(text)  # plain text: a model's tokens are never markup
            bar = self.output.verticalScrollBar()
            bar.setValue(bar.maximum())

    def set_following(self, following: bool) -> None:
        """Whether new rounds are selected as they come (else the follow button shows)."""
        self.follow_button.setVisible(not following)

    def clear(self, header=None) -> None:
        self._total = 0
        self.follow_button.hide()
        self.lossy.clear()
        self.lossy.note(*((None, None) if header is None else (header.settings,
                                                              drafter_notes(header))))  # fmt: skip
        self.greedy.clear()
        self.greedy.dtype = None if header is None else header.target.dtype
        self.view.clear_session(header)
        self.cuts.clear(header)
        self._show_beyond(header is not None and _may_keep_beyond(header.settings))
        self.slider.blockSignals(True)
        self.slider.setRange(0, 0)
        self.slider.blockSignals(False)
        self.slider.setEnabled(False)
        self.round_label.setText(NO_ROUNDS_YET if header is not None else NO_ROUNDS)

    def append_rounds(self, rounds: Sequence[Round]) -> None:
        self.view.append_rounds(rounds)
        if rounds:
            self.lossy.note(rounds[-1].settings)
            self.greedy.note(rounds)
        if not self._beyond and any(_may_keep_beyond(r.settings) for r in rounds):
            self._show_beyond(True)
        self.slider.blockSignals(True)
        self.slider.setRange(0, self.view.round_count - 1)
        self.slider.blockSignals(False)
        self.slider.setEnabled(True)

    def _show_beyond(self, on: bool) -> None:
        """The legend names the dotted mark while the session has a rule that can keep a
        draft beyond the token-wise stop."""
        self._beyond = on
        self.legend.setText(palette.fate_legend_html(beyond=on))

    def set_total(self, total: int) -> None:
        """How many rounds the session has (a replay: its trace), for "Round i / n"."""
        self._total = total
        if self.view.round_count and self.slider.isEnabled():
            self.show_round(self.slider.value())

    def show_round(self, index: int) -> None:
        """Move the slider (without emitting) and describe the round."""
        self.slider.blockSignals(True)
        self.slider.setValue(index)
        self.slider.blockSignals(False)
        total = max(self._total, self.view.round_count)
        self.round_label.setText(round_text(self.view.round(index), total))
        if self.cuts.isVisibleTo(self):
            self.cuts.show_round(self.view.round(index))

    def _slider_moved(self, index: int) -> None:
        if 0 <= index < self.view.round_count:
            self.round_chosen.emit(index)
