"""Monte Carlo panel: run the rule N times on the worker thread and watch the histogram of
the emitted token land on p (or, for a wrong rule, miss it)."""

from __future__ import annotations

import html

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from specviz.core.lab.distributions import BarLayout
from specviz.core.lab.montecarlo import LEVEL, MonteCarloResult
from specviz.core.lab.rules import MAX_SAMPLES, MIN_SAMPLES, RULE_LABELS, RULES
from specviz.gui.lab.bar_plots import HISTOGRAM_SERIES, RIGHT, WRONG, GroupedBars
from specviz.gui.lab.worker import LabRequest, LabWorker
from specviz.gui.session.threads import start_worker

RULE_NAMES = {
    "correct": "correct rule (Leviathan et al.)",
    "naive-reject": "WRONG: reject whenever p < q",
    "resample-from-p": "WRONG: resample from p",
}


class MonteCarloPanel(QGroupBox):
    """Controls, live histogram and figures of one Monte Carlo run at a time. GUI thread;
    the sampling itself runs in a LabWorker on its own QThread."""

    _start = Signal(object)  # LabRequest -> worker.run (queued: the worker's thread)
    result_changed = Signal(object)  # the latest MonteCarloResult shown (GUI thread)
    run_finished = Signal(object)  # the final (or cancelled) MonteCarloResult (GUI thread)

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Monte Carlo: run the rule N times, count the emitted tokens", parent)
        self._p = self._q = np.ones(1)
        self._layout: BarLayout | None = None
        self._run_id = 0
        self._shown_run = 0  # the run whose results are drawn; 0 after p, q or rule change
        self.running = False
        self.result: MonteCarloResult | None = None

        self.rule = QComboBox()
        self.rule.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        for rule in RULES:
            self.rule.addItem(RULE_NAMES[rule], rule)
        self.samples = QSpinBox()
        self.samples.setRange(MIN_SAMPLES, MAX_SAMPLES)
        self.samples.setSingleStep(10_000)
        self.samples.setValue(100_000)
        self.samples.setGroupSeparatorShown(True)
        self.samples.setToolTip(f"{MIN_SAMPLES:,} to {MAX_SAMPLES:,} runs")
        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.run_button = QPushButton("Run")
        self.run_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        self.progress.setFormat("")
        # room for its longest text ("1,000,000 / 1,000,000 (cancelled)"), never clipped
        self.progress.setMinimumWidth(
            self.progress.fontMetrics().horizontalAdvance("0,000,000 / 0,000,000 (cancelled)") + 24
        )
        controls = QHBoxLayout()
        for text, widget in (("Rule", self.rule), ("N", self.samples), ("seed", self.seed)):
            controls.addWidget(QLabel(text))
            controls.addWidget(widget)
        controls.addWidget(self.run_button)
        controls.addWidget(self.cancel_button)
        controls.addStretch(1)

        self.rule_note = QLabel()
        self.rule_note.setTextFormat(Qt.TextFormat.RichText)
        self.rule_note.setWordWrap(True)
        self.histogram = GroupedBars(HISTOGRAM_SERIES, y_label="share of emitted tokens")
        self.figures = QLabel()
        self.figures.setWordWrap(True)
        self.figures.setTextFormat(Qt.TextFormat.RichText)
        self.figures.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QVBoxLayout(self)
        layout.addLayout(controls)
        layout.addWidget(self.progress)  # a row of its own: the lab fits 1280 pixels
        layout.addWidget(self.rule_note)
        layout.addWidget(self.histogram, 1)
        layout.addWidget(self.figures)

        self.worker, self.thread = start_worker(LabWorker(), "specviz-lab")
        self._start.connect(self.worker.run)
        self.worker.progress.connect(self._on_progress)
        self.worker.finished.connect(self._on_finished)
        self.worker.failed.connect(self._on_failed)
        self.run_button.clicked.connect(self.run)
        self.cancel_button.clicked.connect(self.cancel)
        self.rule.currentIndexChanged.connect(self._rule_changed)
        self._rule_changed()

    # ------------------------------------------------------------------------------ API

    def set_distributions(self, p: np.ndarray, q: np.ndarray, layout: BarLayout) -> None:
        """New p and q (normalised, from core): stops a run and clears the histogram."""
        self._abandon()
        self._p, self._q, self._layout = p, q, layout
        self.result = None
        self._draw(None)

    def run(self) -> None:
        """Start a run with the current controls (a running one is cancelled first)."""
        self.cancel()
        self._run_id += 1
        self._shown_run = self._run_id
        request = LabRequest(
            self._run_id,
            self._p,
            self._q,
            self.samples.value(),
            self.rule.currentData(),
            self.seed.value(),
        )
        self.running = True
        self.result = None
        self._draw(None)
        self.progress.setValue(0)
        self.progress.setFormat("starting…")
        self._buttons()
        self._start.emit(request)

    def cancel(self) -> None:
        if self.running:
            self.worker.cancel(self._run_id)

    def _abandon(self) -> None:
        """Cancel the run and stop drawing it: what it samples no longer matches the panel."""
        self.cancel()
        self._shown_run = 0
        if self.running:
            self.progress.setFormat("cancelled: the distributions or the rule changed")

    def shutdown(self) -> None:
        """Stop the run and the thread (on close / quit)."""
        self.worker.cancel(self._run_id)
        if self.thread.isRunning():
            self.thread.quit()
            self.thread.wait()

    # ------------------------------------------------------------------------------ slots

    def _on_progress(self, run_id: int, result: MonteCarloResult) -> None:
        if run_id == self._shown_run and self.running:
            self._draw(result)

    def _on_finished(self, run_id: int, result: MonteCarloResult) -> None:
        if run_id != self._run_id:
            return
        self.running = False
        if run_id == self._shown_run:
            self._draw(result)
        else:
            self.progress.setValue(0)
        self._buttons()
        self.run_finished.emit(result)

    def _on_failed(self, run_id: int, message: str) -> None:
        if run_id != self._run_id:
            return
        self.running = False
        self._buttons()
        self.figures.setText(f"<span style='color:{WRONG}'>The run failed: {message}</span>")

    def _rule_changed(self) -> None:
        rule = self.rule.currentData()
        text = html.escape(RULE_LABELS[rule].removeprefix("WRONG: "))
        if rule == "correct":
            self.rule_note.setText(f"<span style='color:{RIGHT}'>{text}</span>")
        else:
            self.rule_note.setText(
                f"<b style='color:{WRONG}'>WRONG RULE, for contrast</b> "
                f"<span style='color:{WRONG}'>— {text}. The emitted tokens will not follow p."
                "</span>"
            )
        if self._layout is not None:
            self._abandon()
            self.result = None
            self._draw(None)

    # ------------------------------------------------------------------------------ drawing

    def _buttons(self) -> None:
        self.run_button.setEnabled(not self.running)
        self.cancel_button.setEnabled(self.running)

    def _draw(self, result: MonteCarloResult | None) -> None:
        if self._layout is None:
            return
        self.result = result
        lay = self._layout
        empirical = lay.apply(result.empirical) if result is not None else None
        self.histogram.set_values(lay.labels, [lay.apply(self._p), empirical, lay.apply(self._q)])
        if result is None:
            if not self.running:
                self.progress.setValue(0)
                self.progress.setFormat("")
            sampling = self.running and self._shown_run == self._run_id
            self.figures.setText(
                "Sampling…"
                if sampling
                else "Press <b>Run</b>: the histogram fills in as samples arrive."
            )
            return
        self.progress.setValue(round(1000 * result.n / result.n_requested))
        state = "cancelled" if result.cancelled else "done" if result.done else "running"
        self.progress.setFormat(f"{result.n:,} / {result.n_requested:,} ({state})")
        self.result_changed.emit(result)
        misses = result.rejects()
        verdict = (
            f"<b style='color:{WRONG}'>misses p</b>: p-value &lt; {LEVEL}, the emitted tokens "
            "do not follow the target"
            if misses
            else f"<b style='color:{RIGHT}'>lands on p</b>: no evidence against p at the "
            f"{LEVEL} level"
        )
        self.figures.setText(
            f"{result.n:,} samples &nbsp;·&nbsp; acceptance rate <b>{result.acceptance_rate:.4f}"
            f"</b> vs α = {result.alpha:.4f} &nbsp;·&nbsp; TV(emitted, p) = <b>{result.tv:.4f}"
            f"</b> &nbsp;·&nbsp; χ² = <b>{result.chi2:.1f}</b> ({result.dof} dof), p-value "
            f"<b>{result.p_value:.3g}</b><br>{verdict}"
        )
