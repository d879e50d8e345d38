"""The seeds' arithmetic as a table: acceptance path + rejection path = p, token by token."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from specviz.core.lab.arithmetic import Arithmetic
from specviz.core.lab.distributions import BarLayout
from specviz.gui import palette
from specviz.gui.lab.bar_plots import RIGHT, WRONG, show_token

COLUMNS = (
    ("token", None, "the token"),
    ("p", palette.P, "target probability"),
    ("q", palette.Q, "draft probability"),
    ("min(p,q)\naccept path", palette.MIN_PQ, "q·min(1, p/q) = min(p, q): drafted and accepted"),
    ("max(0,p−q)", palette.EXCESS, "what the acceptance path leaves uncovered"),
    ("residual", palette.EXCESS, "norm(max(0, p − q)): where a rejection resamples from"),
    ("(1−α)·resid.\nreject path", palette.EXCESS, "P(reject) × residual: rejected, then drawn"),
    ("sum of\npaths", palette.P, "accept path + reject path"),
    ("= p?", None, "the sum equals p (to float precision)"),
)


class ArithmeticTable(QWidget):
    """Per token: q·min(1, p/q) = min(p, q) on the acceptance path, P(reject)·residual on
    the rejection path, and their sum, which is p. Redrawn from core's Arithmetic."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.caption.setTextFormat(Qt.TextFormat.RichText)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QTableWidget.SelectionMode.NoSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.setAlternatingRowColors(True)
        for col, (name, colour, tip) in enumerate(COLUMNS):
            item = QTableWidgetItem(name)
            item.setToolTip(tip)
            if colour:
                item.setForeground(QBrush(QColor(colour)))
            self.table.setHorizontalHeaderItem(col, item)
        header = self.table.horizontalHeader()
        small = header.font()
        small.setPointSize(max(7, small.pointSize() - 1))
        header.setFont(small)
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.caption)
        layout.addWidget(self.table, 1)

    def show_arithmetic(self, a: Arithmetic, layout: BarLayout) -> None:
        rows = a.rows(layout)
        self.caption.setText(
            f"α = Σ min(p, q) = <b>{a.alpha:.4f}</b> (a draft is accepted) &nbsp; "
            f"1 − α = <b>{a.reject:.4f}</b> (a rejection). Acceptance path: "
            "q(x)·min(1, p(x)/q(x)) = min(p, q). Rejection path: (1 − α)·residual = "
            "max(0, p − q). Their sum is p for every token."
        )
        self.table.setRowCount(len(rows) + 1)
        for r, row in enumerate(rows):
            values = (row.p, row.q, row.overlap, row.excess, row.residual, row.reject_path)
            cells = [show_token(row.label, 14), *(f"{v:.4f}" for v in values), f"{row.total:.4f}"]
            cells.append("✓" if row.matches_p else "✗")
            for c, text in enumerate(cells):
                self._set(r, c, text)
            colour = RIGHT if row.matches_p else WRONG
            self.table.item(r, len(COLUMNS) - 1).setForeground(QBrush(QColor(colour)))
        # The totals are the identities of the seeds: sum min = alpha, sum max(0, p-q) = 1-alpha.
        total = ("Σ", 1.0, 1.0, a.alpha, a.reject, 1.0, a.reject, 1.0)
        last = len(rows)
        for c, value in enumerate(total):
            self._set(last, c, value if isinstance(value, str) else f"{value:.4f}", bold=True)
        self._set(last, len(COLUMNS) - 1, "")
        # As tall as its rows (up to a point), so the column below gets the spare height.
        height = self.table.horizontalHeader().sizeHint().height() + 2 * self.table.frameWidth()
        height += self.table.verticalHeader().length() + 2
        height += self.table.horizontalScrollBar().sizeHint().height()  # when it is narrow
        self.table.setMaximumHeight(height)
        self.table.setMinimumHeight(min(height, 420))

    def _set(self, row: int, col: int, text: str, bold: bool = False) -> None:
        item = self.table.item(row, col)
        if item is None:
            item = QTableWidgetItem()
            self.table.setItem(row, col, item)
        item.setText(text)
        align = Qt.AlignmentFlag.AlignLeft if col == 0 else Qt.AlignmentFlag.AlignRight
        if col == len(COLUMNS) - 1:
            align = Qt.AlignmentFlag.AlignHCenter
        item.setTextAlignment(align | Qt.AlignmentFlag.AlignVCenter)
        font = item.font()
        font.setBold(bold)
        item.setFont(font)

    def cell(self, row: int, col: int) -> str:
        item = self.table.item(row, col)
        return item.text() if item is not None else ""
