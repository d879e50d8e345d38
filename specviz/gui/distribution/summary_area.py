"""The distribution panel's explanation in a box of its own: as tall as its text up to
MAX_LINES lines, the rest scrolled. GUI thread only.

A block round's explanation runs to nine or ten lines; laid out whole it took the plots'
room, and at 1280x720 the accept test shrank to about 40 pixels (its ticks ran into each
other) and the residual printed two labels on one another. The plots keep MIN_PLOT pixels.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QFrame, QScrollArea, QWidget

from specviz.gui.stream.rich_line import RichLine

MIN_PLOT = 80  # px: the least height of the p/q bars, the accept test and the residual
SUMMARY_HEIGHT = 52  # the summary's least height (px); it grows to its longest text


class SummaryArea(QScrollArea):
    """Holds a RichLine (`summary`) as wide as its view; the area is as tall as the tallest
    text so far (the line's height only grows), at most MAX_LINES lines."""

    MAX_LINES = 5

    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.summary = summary = RichLine("", SUMMARY_HEIGHT)
        summary.cap = 0  # it sizes itself in the view (gui/stream/rich_line.py)
        summary.setText(text)
        self.setWidget(summary)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        summary.installEventFilter(self)
        self.viewport().installEventFilter(self)
        self.fit()

    def most(self) -> int:
        return self.summary.fontMetrics().lineSpacing() * self.MAX_LINES

    def fit(self) -> None:
        """As tall as the text (RichLine's height only grows), at most MAX_LINES lines."""
        height = min(self.summary.height(), self.most())
        self.summary.cap = height  # a long text scrolls; a shorter one after it does not
        if height != self.height() or self.minimumHeight() != height:
            self.setFixedHeight(height)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.Resize:
            if watched is self.summary:
                self.fit()
            elif watched is self.viewport() and self.viewport().width() != self.summary.width():
                self.summary.resize(self.viewport().width(), self.summary.height())
        return False
