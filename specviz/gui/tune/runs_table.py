"""The Tune panel's per-prompt table: one row per run of a sweep (prompt, category, K,
alpha, tokens per pass, measured speedup); double-clicking a row or "Open trace" emits
`open_trace(path)` with that run's trace. GUI thread only; plain text only."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from specviz.core.tune.table import PromptRow

RUN_COLUMNS = ("prompt", "category", "K", "alpha", "tokens/pass", "measured")


def _f(value, fmt: str = "{:.2f}") -> str:
    return "n/a" if value is None else fmt.format(value)


class RunTable(QWidget):
    """Per-prompt rows; `open_trace(path)` when the user asks for a run's trace."""

    open_trace = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list[PromptRow] = []
        self.table = QTableWidget(0, len(RUN_COLUMNS))
        self.table.setHorizontalHeaderLabels(RUN_COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QTableWidget.SelectionMode.SingleSelection)
        self.table.cellDoubleClicked.connect(lambda row, _col: self.open_row(row))
        self.table.itemSelectionChanged.connect(self._update_button)
        self.open_button = QPushButton("Open trace")
        self.open_button.setToolTip("replay the selected run's trace in the window")
        self.open_button.setEnabled(False)
        self.open_button.clicked.connect(self._open_selected)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("runs (double-click: open the trace)"), 1)
        bar.addWidget(self.open_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.table)

    def set_rows(self, rows: Sequence[PromptRow]) -> None:
        self.rows = list(rows)
        self.table.setRowCount(len(self.rows))
        for i, r in enumerate(self.rows):
            cells = (
                str(r.prompt_index + 1),
                r.category,  # from a file: a QTableWidgetItem shows it as plain text
                str(r.k),
                _f(r.alpha, "{:.3f}"),
                _f(r.tokens_per_pass),
                r.speedup.short(),
            )
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if r.trace_path is None:
                    item.setToolTip("no trace was written for this run")
                self.table.setItem(i, j, item)
        self.table.resizeColumnsToContents()
        self._update_button()

    def _selected(self) -> int | None:
        rows = {i.row() for i in self.table.selectedItems()}
        return rows.pop() if len(rows) == 1 else None

    def _update_button(self) -> None:
        row = self._selected()
        self.open_button.setEnabled(row is not None and self.rows[row].trace_path is not None)

    def _open_selected(self) -> None:
        row = self._selected()
        if row is not None:
            self.open_row(row)

    def open_row(self, row: int) -> bool:
        """Emit open_trace for row's run; False if it has no trace."""
        if not 0 <= row < len(self.rows) or self.rows[row].trace_path is None:
            return False
        self.open_trace.emit(self.rows[row].trace_path)
        return True
