"""The token stream with its legend above and the round slider below. GUI thread only."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSlider, QToolButton, QVBoxLayout, QWidget

from ..core.trace import Round
from . import palette
from .token_view import BOUNDARY_MARK, TokenView


def legend_html() -> str:
    """The legend: every fate in its own colours, as the stream draws it."""
    parts = []
    for f in palette.FATES.values():
        style = f"color:{f.foreground}; background:{f.background};"
        if f.struck:
            style += " text-decoration: line-through;"
        parts.append(f"<span style='{style}'>&nbsp;{f.label}&nbsp;</span>")
    prompt = (
        f"<span style='color:{palette.PROMPT}; background:{palette.PROMPT_BACKGROUND};'>"
        "&nbsp;prompt&nbsp;</span>"
    )
    mark = f"<b style='color:{palette.BOUNDARY}'>{BOUNDARY_MARK}</b> round start"
    return " ".join([prompt, *parts]) + f" &nbsp; {mark} &nbsp; <i>(hover: numbers; click)</i>"


def round_text(rnd: Round, total: int) -> str:
    s = rnd.settings
    sampling = "" if s is None else f" \u00b7 K {s.k} \u00b7 T {s.temperature:g}"
    end = f" \u00b7 finished: {rnd.finish_reason}" if rnd.finish_reason else ""
    return (
        f"<b>Round {rnd.index + 1} / {total}</b> \u00b7 drafted {rnd.n_drafted} \u00b7 "
        f"accepted {rnd.n_accepted} \u00b7 emitted {rnd.n_emitted} \u00b7 "
        f"draft {rnd.draft_ms:.1f} ms \u00b7 verify {rnd.verify_ms:.1f} ms{sampling}{end}"
    )


class StreamPanel(QWidget):
    """Legend, TokenView and the round slider. round_chosen(index) when the user moves it."""

    round_chosen = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.legend = QLabel(legend_html())
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setWordWrap(True)
        self.legend.setToolTip(
            "<br>".join(f"<b>{f.label}</b>: {f.meaning}" for f in palette.FATES.values())
        )
        self.view = TokenView()
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
        self.round_label = QLabel("No rounds yet: type a prompt and press Step (Space).")
        self.round_label.setTextFormat(Qt.TextFormat.RichText)
        row = QHBoxLayout()
        row.addWidget(QLabel("Round"))
        row.addWidget(self.prev_button)
        row.addWidget(self.slider, 1)
        row.addWidget(self.next_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.legend)
        layout.addWidget(self.view, 1)
        layout.addLayout(row)
        layout.addWidget(self.round_label)

    def clear(self, header=None) -> None:
        self.view.clear_session(header)
        self.slider.blockSignals(True)
        self.slider.setRange(0, 0)
        self.slider.blockSignals(False)
        self.slider.setEnabled(False)
        self.round_label.setText(
            "No rounds yet: press Step (Space) or Run (R)."
            if header is not None
            else "No rounds yet: type a prompt and press Step (Space)."
        )

    def append_round(self, rnd: Round) -> None:
        self.append_rounds((rnd,))

    def append_rounds(self, rounds: Sequence[Round]) -> None:
        self.view.append_rounds(rounds)
        self.slider.blockSignals(True)
        self.slider.setRange(0, self.view.round_count - 1)
        self.slider.blockSignals(False)
        self.slider.setEnabled(True)

    def show_round(self, index: int) -> None:
        """Move the slider (without emitting) and describe the round."""
        self.slider.blockSignals(True)
        self.slider.setValue(index)
        self.slider.blockSignals(False)
        self.round_label.setText(round_text(self.view.round(index), self.view.round_count))

    @property
    def at_end(self) -> bool:
        """The slider is on the newest round (new rounds are then followed)."""
        return self.slider.value() >= self.slider.maximum()

    def _slider_moved(self, index: int) -> None:
        if 0 <= index < self.view.round_count:
            self.round_chosen.emit(index)
