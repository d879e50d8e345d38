"""A paragraph of rich text that changes at every round (the round's line under the stream,
the distribution panel's summary). GUI thread only.

A word-wrapped QLabel asks the window to lay itself out again at every new text (its height
for its width may have changed): the stream panel, the distribution panel, both splitters and
the window, one Step after another. RichLine lays out its own text and asks for a layout only
when a text needs more height than it has; its height never shrinks until its width
changes, so that the panels below it keep their sizes (and their axes) from one round to the
next. The text is trusted markup built by specviz (a trace's strings are escaped first).
"""

from __future__ import annotations

import math

from PySide6.QtCore import QSize
from PySide6.QtGui import QAbstractTextDocumentLayout, QPainter, QPalette, QTextDocument
from PySide6.QtWidgets import QSizePolicy, QWidget


class RichLine(QWidget):
    """Rich text, word-wrapped, top-left aligned, at least `least_height` pixels high."""

    def __init__(self, text: str = "", least_height: int = 0, parent: QWidget | None = None):
        super().__init__(parent)
        self._least = least_height
        self._text = ""
        self._height = least_height  # the height laid out for: the tallest text so far
        # In a scroll area (not widget-resizable), its view's height: the line sizes itself
        # (no layout request goes up the window), and a grown height above the view's is
        # given back, down to the text's or the view's, so that no empty room is scrolled to.
        self.cap: int | None = None
        self._doc = QTextDocument(self)
        self._doc.setDocumentMargin(0)
        self._doc.setDefaultFont(self.font())
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.setText(text)

    def text(self) -> str:
        """The markup last set (as QLabel.text)."""
        return self._text

    def setText(self, text: str) -> None:
        if text == self._text and self._doc.toPlainText():
            return
        self._text = text
        self._doc.setHtml(text)
        self._fit()
        self.update()

    def needed_height(self, width: int | None = None) -> int:
        """The height the text takes at `width` (default: the current width)."""
        self._doc.setTextWidth(max(self.width() if width is None else width, 40))
        return math.ceil(self._doc.size().height())

    def _fit(self) -> None:
        needed = max(self.needed_height(), self._least)
        if needed > self._height:  # grow (a layout pass); a shorter text keeps the height
            self._set_height(needed)
        elif self.cap is not None and self._height > max(needed, self.cap):
            self._set_height(max(needed, self.cap))

    def _set_height(self, height: int) -> None:
        self._height = height
        if self.cap is None:
            self.setFixedHeight(height)
        else:
            self.resize(self.width(), height)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():  # fit the height to the width
            self._set_height(max(self.needed_height(), self._least))

    def sizeHint(self) -> QSize:
        return QSize(math.ceil(self._doc.idealWidth()), self._height)

    def minimumSizeHint(self) -> QSize:
        return QSize(0, self._height)

    def paintEvent(self, event) -> None:
        if self._doc.textWidth() != max(self.width(), 40):
            self._doc.setTextWidth(max(self.width(), 40))
        painter = QPainter(self)
        context = QAbstractTextDocumentLayout.PaintContext()
        context.palette = QPalette(self.palette())
        text = self.palette().color(self.foregroundRole())
        context.palette.setColor(QPalette.ColorRole.Text, text)
        self._doc.documentLayout().draw(painter, context)
        painter.end()
