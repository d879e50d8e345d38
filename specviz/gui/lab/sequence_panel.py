"""The lab on sequences (core.lab.sequence) in the window: K i.i.d. drafted positions a
round, every rule on the same drafts and uniforms. A table of each rule's mean kept drafts
with its interval and its losslessness verdict, and one round position by position (X_i,
P, Q, the block's p_i, Z_i and h_i, the draw u_i, and where each rule stopped).

The comparison runs on its own thread (a few seconds at 300,000 rounds); every number
comes from core.lab.sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from specviz.core.lab.montecarlo import LEVEL
from specviz.core.lab.sequence import (
    MAX_VOCAB,
    SEQUENCE_LABELS,
    SEQUENCE_RULES,
    TELLING_K,
    TELLING_P,
    TELLING_Q,
    blind_spots,
    compare,
    example_round,
    verdict,
)
from specviz.gui.lab.bar_plots import show_token
from specviz.gui.session.threads import start_worker

MAX_WINDOW_ROUNDS = 300_000  # each rule holds a [rounds, V] residual while it runs
TONES = {"right": "#1a7f37", "bad": "#b42318", "blind": "#9a6700"}


class SequenceWorker(QObject):
    """Runs compare() and example_round() off the GUI thread."""

    done = Signal(int, object)  # run_id, (results, example)
    failed = Signal(int, str)

    @Slot(object)
    def run(self, request: tuple) -> None:
        run_id, p, q, k, rounds, seed = request
        try:
            results = compare(p, q, k, rounds, seed)
            example = example_round(p, q, k, rounds, seed)
        except Exception as e:  # noqa: BLE001 - every failure reaches the window as text
            self.failed.emit(run_id, f"{type(e).__name__}: {e}")
            return
        self.done.emit(run_id, (results, example))


class SequencePanel(QGroupBox):
    """Controls, the rules' table and an example round. GUI thread."""

    _start = Signal(object)
    compared = Signal(object)  # the results shown (GUI thread), for tests and callers
    # "An example that tells them apart": (p, q, labels, title) for the lab to show
    example_requested = Signal(object, object, object, str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Sequences: K drafts a round, every rule on the same draws", parent)
        self._p = self._q = np.ones(1)
        self._labels: Sequence[str] | Callable[[int], str] = ()
        self._run_id = 0
        self.running = False
        self.k = QSpinBox()
        self.k.setRange(1, 16)
        self.k.setValue(2)
        self.rounds = QSpinBox()
        self.rounds.setRange(1_000, MAX_WINDOW_ROUNDS)
        self.rounds.setSingleStep(50_000)
        self.rounds.setValue(100_000)
        self.rounds.setGroupSeparatorShown(True)
        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.run_button = QPushButton("Run every rule")
        self.telling_button = QPushButton("An example that tells them apart")
        self.telling_button.setToolTip(
            f"p = {TELLING_P}, q = {TELLING_Q}, K {TELLING_K}: the block stops early where "
            "p_i < 1, so each wrong rule's residual is drawn from and it misses p"
        )
        self.telling_button.clicked.connect(self._telling)
        self.status = QLabel()
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setWordWrap(True)
        controls = QHBoxLayout()
        for text, widget in (("K", self.k), ("rounds", self.rounds), ("seed", self.seed)):
            controls.addWidget(QLabel(text))
            controls.addWidget(widget)
        controls.addWidget(self.run_button)
        controls.addWidget(self.telling_button)
        controls.addStretch(1)
        self.table = _table(["rule", "drafts accepted / round [95%]", "p-value", "TV", "verdict"])
        self.table.verticalHeader().hide()
        self.table.setRowCount(len(SEQUENCE_RULES))
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setFixedHeight(_rows_height(self.table, bar=False))  # every rule's row
        self.table.setRowCount(0)
        self.example = _table([])
        self.example_caption = QLabel()
        self.example_caption.setTextFormat(Qt.TextFormat.PlainText)
        self.example_caption.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addLayout(controls)
        layout.addWidget(self.status)
        layout.addWidget(self.table)
        layout.addWidget(self.example_caption)
        layout.addWidget(self.example, 1)
        self.example.setMinimumHeight(_rows_height(self.example, 3))  # K 2 whole, scrolled
        self.worker, self.thread = start_worker(SequenceWorker(), "specviz-lab-sequences")
        self._start.connect(self.worker.run)
        self.worker.done.connect(self._on_done)
        self.worker.failed.connect(self._on_failed)
        self.run_button.clicked.connect(self.run)
        self._idle()

    def set_distributions(self, p, q, labels) -> None:
        self._p, self._q, self._labels = np.asarray(p), np.asarray(q), labels
        self._run_id += 1  # a run in progress no longer matches
        self.running = False
        self.table.setRowCount(0)
        self.example.setRowCount(0)
        self.example.setColumnCount(0)
        self.example_caption.setText("")
        self._idle()

    def run(self) -> None:
        if len(self._p) > MAX_VOCAB:
            self.status.setText(
                f"The sequence lab counts pairs of tokens (V² cells): at most {MAX_VOCAB} "
                f"tokens, and these p and q have {len(self._p):,}. Edit a smaller pair."
            )
            return
        self._run_id += 1
        self.running = True
        self.run_button.setEnabled(False)
        self.status.setText(f"running every rule on {self.rounds.value():,} rounds…")
        request = (self._run_id, self._p, self._q, self.k.value(), self.rounds.value(),
                   self.seed.value())  # fmt: skip
        self._start.emit(request)

    def _telling(self) -> None:
        self.k.setValue(TELLING_K)
        self.example_requested.emit(TELLING_P, TELLING_Q, ("A", "B", "C"), "an example "
                                    "that tells the rules apart")  # fmt: skip

    def shutdown(self) -> None:
        self._run_id += 1
        if self.thread.isRunning():
            self.thread.quit()
            self.thread.wait()

    # ------------------------------------------------------------------------------ slots

    def _idle(self) -> None:
        self.run_button.setEnabled(True)
        if not self.table.rowCount():
            self.status.setText(
                "Press Run: token-wise, block, the lossy typical rule and two wrong block "
                "variants on the same drafts and uniforms; a lossless rule's stream passes a "
                f"chi-square of consecutive pairs against p x p at {LEVEL}."
            )

    def _on_failed(self, run_id: int, message: str) -> None:
        if run_id == self._run_id:
            self.running = False
            self.status.setText(f"The comparison failed: {message}")
            self._idle()

    def _on_done(self, run_id: int, payload) -> None:
        if run_id != self._run_id:
            return
        self.running = False
        results, example = payload
        self._fill_table(results)
        self._fill_example(example)
        r = results[0]
        said = " ".join(blind_spots(results))
        self.status.setText(
            f"{r.rounds:,} rounds of K = {r.k}, seed {self.seed.value()}."
            + (f" {said}" if said else "")
        )
        self._idle()
        self.compared.emit(results)

    def _fill_table(self, results) -> None:
        self.table.setRowCount(len(results))
        for row, r in enumerate(results):
            lo, hi = r.mean_accepted_ci
            words, tone = verdict(r)
            cells = (r.rule, f"{r.mean_accepted:.4f} [{lo:.4f}, {hi:.4f}]",
                     f"{r.p_value:.3g}", f"{r.tv:.4f}", words)  # fmt: skip
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(SEQUENCE_LABELS[r.rule])
                if column == 4:
                    item.setForeground(QColor(TONES[tone]))
                self.table.setItem(row, column, item)
        self.table.resizeColumnsToContents()

    def _fill_example(self, e) -> None:
        """One row per drafted position (a round has few), its numbers in columns."""
        k = len(e.drafts)
        label = self._labels if callable(self._labels) else self._labels.__getitem__
        columns = [
            ("X_i", [show_token(str(label(x))) for x in e.drafts]),
            ("P(X_i)", [f"{v:.4f}" for v in e.p_x]),
            ("Q(X_i)", [f"{v:.4f}" for v in e.q_x]),
            ("p_i", [f"{v:.4f}" for v in e.weights]),
            ("Z_i", ["—" if v is None else f"{v:.4f}" for v in e.z]),
            ("h_i", [f"{v:.4f}" for v in e.h]),
            ("u_i", [f"{v:.4f}" for v in e.u]),
            ("accepted by", [", ".join(r for r in SEQUENCE_RULES if i < e.kept[r]) or "—"
                         for i in range(k)]),
        ]  # fmt: skip
        self.example.setColumnCount(len(columns))
        self.example.setHorizontalHeaderLabels([name for name, _ in columns])
        self.example.setRowCount(k)
        self.example.setVerticalHeaderLabels([f"i = {i + 1}" for i in range(k)])
        for column, (_, cells) in enumerate(columns):
            for row, text in enumerate(cells):
                self.example.setItem(row, column, QTableWidgetItem(text))
        self.example.resizeColumnsToContents()
        stops = ", ".join(f"{rule} {e.kept[rule]}" for rule in SEQUENCE_RULES)
        self.example_caption.setText(f"The first round (drafts accepted: {stops}).")
        self.example_caption.setToolTip(
            "p_i: the block's running weight; Z_i = Σ max(0, p_i P − Q); h_i: its chance of "
            "keeping the block up to i. Block keeps X_1..X_i at the last i whose u_i < h_i; "
            "token-wise stops at the first u_i ≥ min(1, P/Q)."
        )


def _rows_height(table: QTableWidget, rows: int | None = None, bar: bool = True) -> int:
    """The height that shows the header and `rows` rows (all of them) and a scroll bar."""
    rows = table.rowCount() if rows is None else rows
    height = table.horizontalHeader().sizeHint().height() + 2 * table.frameWidth()
    height += rows * table.verticalHeader().defaultSectionSize()
    return height + (table.horizontalScrollBar().sizeHint().height() if bar else 0) + 2


def _table(headers: list[str]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    if headers:
        table.setHorizontalHeaderLabels(headers)
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    table.horizontalHeader().setStretchLastSection(True)
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 6)
    return table
