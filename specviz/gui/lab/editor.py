"""The editor of p and q for a small vocabulary: one slider and one number per entry.

Moving one entry rescales the others of the same distribution so that it still sums to 1
(core `set_entry`); entries cannot go below 0, and a distribution with no mass is refused.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from specviz.core.lab.distributions import SEED_P, SEED_Q, SEED_TOKENS, normalise, set_entry
from specviz.gui import palette

STEPS = 1000  # slider resolution: 0.001
MIN_TOKENS, MAX_TOKENS = 2, 8
KINDS = ("p", "q")


class DistributionEditor(QWidget):
    """Sliders for p and q over a few tokens. `changed` is emitted (GUI thread) after every
    edit; `refused(message)` when an edit was not applied."""

    changed = Signal()
    refused = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._p = np.array(SEED_P, dtype=float)
        self._q = np.array(SEED_Q, dtype=float)
        self._labels: tuple[str, ...] = SEED_TOKENS
        self._rows: list[dict[str, QWidget]] = []
        self._grid = QGridLayout()
        self._grid.setHorizontalSpacing(8)
        self._grid.setVerticalSpacing(2)
        for col, (text, colour) in enumerate(
            (("token", "#222222"), ("p (target)", palette.P), ("q (draft)", palette.Q))
        ):
            head = QLabel(f"<b style='color:{colour}'>{text}</b>")
            self._grid.addWidget(head, 0, 0 if col == 0 else 2 * col - 1, 1, 1 if col == 0 else 2)
        self._grid.setColumnStretch(1, 1)
        self._grid.setColumnStretch(3, 1)
        buttons = QHBoxLayout()
        self.add_button = QPushButton("Add token")
        self.remove_button = QPushButton("Remove token")
        self.reset_button = QPushButton("Seeds' example")
        self.reset_button.setToolTip("q = 0.2, 0.4, 0.3, 0.1 and p = 0.5, 0.1, 0.1, 0.3")
        for b in (self.add_button, self.remove_button, self.reset_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        self.add_button.clicked.connect(self.add_token)
        self.remove_button.clicked.connect(self.remove_token)
        self.reset_button.clicked.connect(self.reset)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(self._grid)
        layout.addLayout(buttons)
        self._rebuild()

    # ------------------------------------------------------------------------------ state

    @property
    def p(self) -> np.ndarray:
        return self._p.copy()

    @property
    def q(self) -> np.ndarray:
        return self._q.copy()

    @property
    def labels(self) -> tuple[str, ...]:
        return self._labels

    def set_values(
        self, p: Sequence[float], q: Sequence[float], labels: Sequence[str] | None = None
    ) -> None:
        """Replace both distributions (each normalised); ValueError leaves them unchanged."""
        pn, qn = normalise(p), normalise(q)
        if pn.size != qn.size:
            raise ValueError(f"p and q must have the same length ({pn.size} vs {qn.size})")
        if not MIN_TOKENS <= pn.size <= MAX_TOKENS:
            raise ValueError(f"the editor holds {MIN_TOKENS} to {MAX_TOKENS} tokens, got {pn.size}")
        labels = tuple(labels) if labels is not None else _names(pn.size)
        if len(labels) != pn.size:
            raise ValueError(f"{len(labels)} labels for {pn.size} tokens")
        self._p, self._q, self._labels = pn, qn, labels
        self._rebuild()
        self.changed.emit()

    def set_entry(self, kind: str, index: int, value: float) -> None:
        """Set p[index] or q[index] to value and rescale the rest; refuses value < 0."""
        current = self._p if kind == "p" else self._q
        try:
            new = set_entry(current, index, value)
        except ValueError as e:
            self._sync()
            self.refused.emit(str(e))
            raise
        if kind == "p":
            self._p = new
        else:
            self._q = new
        self._sync()
        self.changed.emit()

    def reset(self) -> None:
        self.set_values(SEED_P, SEED_Q, SEED_TOKENS)

    def add_token(self) -> None:
        """A new token with no mass under p or q, ready to be dragged up."""
        if self._p.size >= MAX_TOKENS:
            return
        labels = (*self._labels, _names(self._p.size + 1)[-1])
        self.set_values(np.append(self._p, 0.0), np.append(self._q, 0.0), labels)

    def remove_token(self) -> None:
        if self._p.size <= MIN_TOKENS:
            return
        try:
            self.set_values(self._p[:-1], self._q[:-1], self._labels[:-1])
        except ValueError as e:
            self.refused.emit(f"cannot remove the last token: {e}")

    # ------------------------------------------------------------------------------ widgets

    def _rebuild(self) -> None:
        for row in self._rows:
            for widget in row.values():
                self._grid.removeWidget(widget)
                widget.hide()  # gone now, not when the event loop gets to deleteLater
                widget.deleteLater()
        self._rows = []
        for i, name in enumerate(self._labels):
            label = QLabel(name)
            label.setTextFormat(Qt.TextFormat.PlainText)  # a token's text: never markup
            bold = label.font()
            bold.setBold(True)
            label.setFont(bold)
            row: dict[str, QWidget] = {"label": label}
            self._grid.addWidget(row["label"], i + 1, 0)
            for k, kind in enumerate(KINDS):
                slider = QSlider(Qt.Orientation.Horizontal)
                slider.setRange(0, STEPS)
                slider.setMinimumWidth(110)
                slider.setToolTip(  # rich text, so that the escaped name reads as written
                    f"<p>{kind}({html.escape(name)}): drag; the other entries of {kind} rescale</p>"
                )
                spin = QDoubleSpinBox()
                spin.setRange(0.0, 1.0)  # no negative entry can be typed
                spin.setDecimals(3)
                spin.setSingleStep(0.01)
                spin.setKeyboardTracking(False)
                slider.valueChanged.connect(
                    lambda v, kind=kind, i=i: self._edited(kind, i, v / STEPS)
                )
                spin.valueChanged.connect(lambda v, kind=kind, i=i: self._edited(kind, i, v))
                self._grid.addWidget(slider, i + 1, 1 + 2 * k)
                self._grid.addWidget(spin, i + 1, 2 + 2 * k)
                row[f"{kind}_slider"], row[f"{kind}_spin"] = slider, spin
            self._rows.append(row)
        self.add_button.setEnabled(self._p.size < MAX_TOKENS)
        self.remove_button.setEnabled(self._p.size > MIN_TOKENS)
        self._sync()

    def _sync(self) -> None:
        """Show the current values in every slider and box, without echoing signals."""
        for i, row in enumerate(self._rows):
            for kind, values in (("p", self._p), ("q", self._q)):
                slider, spin = row[f"{kind}_slider"], row[f"{kind}_spin"]
                for w in (slider, spin):
                    w.blockSignals(True)
                slider.setValue(round(values[i] * STEPS))
                spin.setValue(float(values[i]))
                for w in (slider, spin):
                    w.blockSignals(False)

    def _edited(self, kind: str, index: int, value: float) -> None:
        current = self._p if kind == "p" else self._q
        if abs(current[index] - value) < 0.5 / STEPS and value not in (0.0, 1.0):
            return  # a slider's rounding of the value it already shows
        try:
            self.set_entry(kind, index, value)
        except ValueError:
            pass  # reported through `refused`; the widgets show the unchanged values

    def row_label(self, index: int) -> QLabel:
        return self._rows[index]["label"]

    def slider(self, kind: str, index: int) -> QSlider:
        return self._rows[index][f"{kind}_slider"]

    def spin(self, kind: str, index: int) -> QDoubleSpinBox:
        return self._rows[index][f"{kind}_spin"]


def _names(n: int) -> tuple[str, ...]:
    return tuple(chr(ord("A") + i) for i in range(n))
