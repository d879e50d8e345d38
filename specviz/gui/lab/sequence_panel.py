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
    LOSSY,
    MAX_VOCAB,
    SEQUENCE_LABELS,
    SEQUENCE_RULES,
    WRONG,
    compare,
    example_round,
)
from specviz.gui.lab.bar_plots import show_token
from specviz.gui.session.threads import start_worker

MAX_WINDOW_ROUNDS = 300_000  # each rule holds a [rounds, V] residual while it runs
RIGHT, BAD = "#1a7f37", "#b42318"


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
        self.status = QLabel()
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setWordWrap(True)
        controls = QHBoxLayout()
        for text, widget in (("K", self.k), ("rounds", self.rounds), ("seed", self.seed)):
            controls.addWidget(QLabel(text))
            controls.addWidget(widget)
        controls.addWidget(self.run_button)
        controls.addStretch(1)
        self.table = _table(["rule", "drafts kept / round [95%]", "p-value", "TV", "verdict"])
        self.table.verticalHeader().hide()
        self.example = _table([])
        self.example_caption = QLabel()
        self.example_caption.setTextFormat(Qt.TextFormat.PlainText)
        self.example_caption.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addLayout(controls)
        layout.addWidget(self.status)
        layout.addWidget(self.table, 2)
        layout.addWidget(self.example_caption)
        layout.addWidget(self.example, 2)
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
                "variants run on the same drafts and uniforms; a lossless rule's stream "
                f"passes a chi-square of consecutive pairs against p x p at {LEVEL}."
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
        self.status.setText(f"{r.rounds:,} rounds of K = {r.k}, seed {self.seed.value()}.")
        self._idle()
        self.compared.emit(results)

    def _fill_table(self, results) -> None:
        self.table.setRowCount(len(results))
        for row, r in enumerate(results):
            lo, hi = r.mean_accepted_ci
            kind = "lossy" if r.rule in LOSSY else "wrong" if r.rule in WRONG else "exact"
            verdict = "lossless (follows p)" if r.lossless else f"misses p ({kind})"
            cells = (r.rule, f"{r.mean_accepted:.4f} [{lo:.4f}, {hi:.4f}]",
                     f"{r.p_value:.3g}", f"{r.tv:.4f}", verdict)  # fmt: skip
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(SEQUENCE_LABELS[r.rule])
                if column == 4:
                    item.setForeground(QColor(RIGHT if r.lossless else BAD))
                self.table.setItem(row, column, item)
        self.table.resizeColumnsToContents()

    def _fill_example(self, e) -> None:
        k = len(e.drafts)
        self.example.setColumnCount(k)
        self.example.setHorizontalHeaderLabels([f"i = {i + 1}" for i in range(k)])
        label = self._labels if callable(self._labels) else self._labels.__getitem__
        rows = [
            ("X_i (drafted)", [show_token(str(label(x))) for x in e.drafts]),
            ("P(X_i)", [f"{v:.4f}" for v in e.p_x]),
            ("Q(X_i)", [f"{v:.4f}" for v in e.q_x]),
            ("p_i (block weight)", [f"{v:.4f}" for v in e.weights]),
            ("Z_i", ["—" if v is None else f"{v:.4f}" for v in e.z]),
            ("h_i", [f"{v:.4f}" for v in e.h]),
            ("u_i", [f"{v:.4f}" for v in e.u]),
        ]
        rows += [
            (f"kept by {rule}", ["kept" if i < e.kept[rule] else "—" for i in range(k)])
            for rule in SEQUENCE_RULES
        ]
        self.example.setRowCount(len(rows))
        self.example.setVerticalHeaderLabels([name for name, _ in rows])
        for row, (_, cells) in enumerate(rows):
            for column, text in enumerate(cells):
                self.example.setItem(row, column, QTableWidgetItem(text))
        stops = ", ".join(f"{rule} {e.kept[rule]}" for rule in SEQUENCE_RULES)
        self.example_caption.setText(
            f"The first round, position by position (drafts kept: {stops}). Block keeps "
            "X_1..X_i at the last i whose u_i < h_i; token-wise stops at the first "
            "u_i ≥ min(1, P/Q)."
        )


def _table(headers: list[str]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    if headers:
        table.setHorizontalHeaderLabels(headers)
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    table.horizontalHeader().setStretchLastSection(True)
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 6)
    return table
