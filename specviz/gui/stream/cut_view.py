"""The shown round's two tokenizations, for a draft whose tokenizer is not the target's
(`--vocab-bridge`; a round's draft_pieces, trace schema 1.8): the draft's own pieces above
the target's drafted tokens, in columns that cover the same text, the columns where the two
cuts differ tinted. The texts are a model's: plain text only, never markup. GUI thread only.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFontDatabase, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QLabel, QTextEdit, QVBoxLayout, QWidget

from specviz.core.trace.records import Round, SessionHeader
from specviz.gui import palette

LABELS = ("draft  ", "target ")  # the two lines' names, of one width
DIVIDER = "\u2502"  # │ before each piece and each token
CONTROLS = {"\n": "\u21b5", "\t": "\u21e5", "\r": "\u240d"}  # ↵ ⇥ ␍: one line each


def one_line(text: str) -> str:
    """A piece as one line shows it: breaks and tabs as arrows, other controls as ·, a
    piece without characters (a byte that only starts one) as ∅."""
    if text == "":
        return "\u2205"
    return "".join(CONTROLS.get(c, c if c.isprintable() else "\u00b7") for c in text)


def cut_columns(rnd: Round) -> list[tuple[str, str, bool]]:
    """(the draft's pieces, the target's tokens, whether the cuts differ) per group of the
    two that covers the same text (core.trace.extras.pieces.DraftPieces.groups), each side padded to
    the group's width; one piece over one token is where they agree."""
    pieces = rnd.draft_pieces
    if pieces is None:
        return []
    texts = pieces.text
    tokens = [t.text for t in rnd.tokens[: rnd.n_drafted]]
    columns = []
    for d0, d1, t0, t1 in pieces.groups(rnd.n_drafted):
        draft = "".join(DIVIDER + one_line(t) for t in texts[d0:d1])
        target = "".join(DIVIDER + one_line(t) for t in tokens[t0:t1])
        width = max(len(draft), len(target))
        columns.append((draft.ljust(width), target.ljust(width), (d1 - d0, t1 - t0) != (1, 1)))
    return columns


def cut_title(rnd: Round, columns: list[tuple[str, str, bool]]) -> str:
    """The view's line above the two cuts (plain text)."""
    if rnd.draft_pieces is None:
        return f"Round {rnd.index + 1}: nothing drafted"
    n_pieces, differ = len(rnd.draft_pieces.ids), sum(1 for c in columns if c[2])
    where = (
        "they cut it alike" if not differ
        else f"the cuts differ in {differ} place{'s' if differ > 1 else ''} (tinted)"
    )  # fmt: skip
    return (
        f"The draft's own cut of its text: {n_pieces} piece{'s' if n_pieces != 1 else ''} "
        f"over the target's {rnd.n_drafted} drafted token{'s' if rnd.n_drafted != 1 else ''}; "
        f"{where}"
    )


def bridged(header: SessionHeader | None) -> bool:
    """The session's draft has a tokenizer of its own (its header's drafter says its
    draft_vocab)."""
    return header is not None and "draft_vocab" in (header.drafter or {})


class CutView(QWidget):
    """Two lines, the draft's pieces and the target's tokens, for the round shown; shown
    while the session's draft has a tokenizer of its own."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.title = QLabel()
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        self.text = QTextEdit()
        self.text.setReadOnly(True)
        self.text.setUndoRedoEnabled(False)
        self.text.setLineWrapMode(QTextEdit.LineWrapMode.NoWrap)
        self.text.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setPointSizeF(max(self.font().pointSizeF(), 9.0) * 1.1)
        self.text.setFont(font)
        self.text.document().setDocumentMargin(2)
        self._lines = self.text.fontMetrics().lineSpacing() * 2 + 10  # two lines and frame
        self.text.setFixedHeight(self._lines)
        self.setToolTip(
            "A draft with a tokenizer of its own cuts its text into its own pieces; the "
            "target verifies its own tokens of that text. Each column covers the same "
            "characters; tinted columns are where the two cuts differ. A blank side: a piece "
            "past the tokens the round proposed, or the end-of-text the bridge added."
        )
        self.text.setToolTip(self.toolTip())
        self._plain = QTextCharFormat()
        self._divider = QTextCharFormat()
        self._divider.setForeground(QColor(palette.BOUNDARY))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 2, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.text)
        self.rows: tuple[str, str] = ("", "")  # the two lines as shown
        self.marked: list[tuple[int, int]] = []  # [start, end) of the tinted columns
        self.hide()

    def clear(self, header: SessionHeader | None) -> None:
        """A new session (or none): shown while its draft has a tokenizer of its own."""
        self.text.clear()
        self.title.setText("")
        self.rows, self.marked = ("", ""), []
        self.setVisible(bridged(header))

    def show_round(self, rnd: Round) -> None:
        columns = cut_columns(rnd)
        self.title.setText(cut_title(rnd, columns))
        self.text.clear()
        cursor = QTextCursor(self.text.document())
        cursor.beginEditBlock()
        rows, marked, at = [], [], len(LABELS[0])
        for side, label in enumerate(LABELS):
            if side:
                cursor.insertBlock()
            cursor.insertText(label, self._divider)
            for column in columns:
                self._insert(cursor, column[side], column[2])
            rows.append(label + "".join(c[side] for c in columns))
        for draft, _, differs in columns:
            if differs:
                marked.append((at, at + len(draft)))
            at += len(draft)
        cursor.endEditBlock()
        self.rows, self.marked = (rows[0], rows[1]), marked
        self._fit()

    def _fit(self) -> None:
        """Two lines high, and the horizontal scroll bar's height more when they are wider
        than the view (it would hide the second line)."""
        wide = self.text.document().idealWidth() > self.text.viewport().width()
        bar = self.text.horizontalScrollBar().sizeHint().height() if wide else 0
        if self.text.height() != self._lines + bar:
            self.text.setFixedHeight(self._lines + bar)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit()

    def _insert(self, cursor: QTextCursor, text: str, differs: bool) -> None:
        """One column's side: dividers grey, the text plain, tinted where the cuts differ."""
        for i, part in enumerate(text.split(DIVIDER)):
            plain, divider = QTextCharFormat(self._plain), QTextCharFormat(self._divider)
            if differs:
                plain.setBackground(QColor(palette.CUT_DIFFERS))
                divider.setBackground(QColor(palette.CUT_DIFFERS))
            if i:
                cursor.insertText(DIVIDER, divider)
            if part:
                cursor.insertText(part, plain)
