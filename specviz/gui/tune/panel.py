"""The Tune panel: the K advisor, live from the session's round records, and a K sweep.

A self-contained widget; the window wires it with a few lines (README, "Tune"):

    panel = TunePanel(run_job=session_controller.run_job)  # sweeps on the session's engine
    panel.apply_k.connect(lambda k: controls.set_k(k))      # "Apply K" -> the session's K
    session_controller.rounds_added.connect(panel.add_rounds)  # each new Round record
    session_controller.reset.connect(panel.reset)            # new session, or a replay

Inputs (GUI thread): `add_rounds(rounds)`, `reset(rounds=())`, `set_settings(settings)`
(sampling settings a sweep uses), `set_runner(run_job)` (hands a gui.tune.sweep_job.SweepJob
to the engine worker, whose engine sweeps on its own models, wherever they are: the models
are loaded once).
Outputs: `open_trace(path)` (a sweep run's trace, from the per-prompt table: the window
replays it), `apply_k(int)`, `remeasure()` (ask the engine for a full probe:
`engine.prober.request_full()`), `sweep_running(bool)` (pause the session while a sweep
runs, so the two do not slow each other's timings). All text from files or models is shown
as plain text.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from specviz.core.metrics.costmodel import CostModel, Figures, leviathan_curve
from specviz.core.metrics.speedup import MIN_PROBES
from specviz.core.metrics.whatif import whatif_fates
from specviz.core.trace.records import Round, Settings
from specviz.core.tune.promptsets import PromptSetError, load_prompt_set
from specviz.core.tune.sweep import SweepConfig, SweepResult
from specviz.core.tune.table import SweepTable, prompt_rows, tables_by_category
from specviz.gui.tune.advisor_plot import AdvisorPlot, fastest_words
from specviz.gui.tune.runs_table import RunTable
from specviz.gui.tune.sweep_job import SweepJob

COLUMNS = ("K", "alpha", "tokens/pass", "measured", "refined", "Leviathan", "measured/refined")
SHIPPED = "shipped set (resources/prompts/tune.jsonl)"


def _f(value, fmt: str = "{:.2f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def swept_drafting(drafter, policy) -> str:
    """What a sweep drafts with, in words (the session's drafter and policy)."""
    from specviz.core.drafters.registry import DrafterConfig

    drafter = drafter or DrafterConfig()
    words = drafter.spec.words(drafter.values())
    return f"{words}, policy {policy.kind if policy is not None else 'constant'}"


def describe(fig: Figures) -> str:
    """The figures line under the curve (plain text)."""
    c = fig.costs
    if fig.first_round is None:
        return "no rounds yet"
    window = f"rounds {fig.first_round}-{fig.first_round + fig.rounds - 1}"
    if not c.n_probes:
        return f"{window}: no cost-model probes yet (a session that calibrates takes them)"
    measured = fig.speedup.text()
    ratio = fig.refined_ratio
    check = "" if ratio is None else f" (measured/refined {ratio:.2f})"
    return (
        f"baseline T_t(1) {_f(fig.baseline_ms_per_token)} ms/token "
        f"({fig.speedup.steps} steps), T_d(1) {_f(c.draft)} ms, "
        f"c {_f(c.cost_ratio, '{:.3f}')}, o {_f(c.overhead(fig.k or 1))} ms "
        f"({window}, {c.n_probes} probes)\n"
        f"K={fig.k}: measured {measured}, predicted refined {_f(fig.speedup_refined, '{:.2f}x')}"
        f"{check}, Leviathan {_f(fig.speedup_leviathan, '{:.2f}x')}; advisor's best K "
        f"{fig.best_k}"
        f" (beyond K={len(fig.acceptance_by_position)} the acceptance of the last measured "
        "position is assumed)"
        + (
            ""
            if advisor_sure(fig)
            else f". Only a guess so far: {fig.rounds} rounds and {c.n_probes} probes; the K "
            f"box takes it from {ADVISOR_ROUNDS} rounds and {MIN_PROBES} probes"
        )
    )


ADVISOR_ROUNDS = 16  # rounds before the advisor's best K is offered beside Apply K


def advisor_sure(fig: Figures) -> bool:
    """Enough rounds and probes that the advisor's K is a measurement's, not one round's."""
    return (
        fig.best_k is not None and fig.rounds >= ADVISOR_ROUNDS and fig.costs.n_probes >= MIN_PROBES
    )


class TunePanel(QWidget):
    """The K advisor and the sweep. GUI thread only."""

    apply_k = Signal(int)  # the K to apply to the session
    open_trace = Signal(str)  # a sweep run's trace file, to replay
    remeasure = Signal()  # the user asked for fresh cost-model probes
    sweep_running = Signal(bool)
    # a SweepJob's reports, emitted on the engine's thread (queued to this one)
    _progress = Signal(int, int, int, object)
    _finished = Signal(int, object)
    _failed = Signal(int, str)

    def __init__(self, run_job: Callable[[SweepJob], None] | None = None, parent=None):
        super().__init__(parent)
        self.run_job = run_job
        self._job: SweepJob | None = None
        self.settings = Settings()
        self.drafting: tuple = (None, None)  # the session's (DrafterConfig, PolicyConfig)
        self.model = CostModel()
        self.figures: Figures | None = None
        self.tables: dict[str, SweepTable] = {}
        self.result: SweepResult | None = None
        self._ids = itertools.count(1)
        self._sweep_id = 0
        self._progress.connect(self._on_progress)
        self._finished.connect(self._on_finished)
        self._failed.connect(self._on_failed)
        self._prompt_file: str | None = None
        self._traces: tempfile.TemporaryDirectory | None = None  # the sweeps' run traces

        self.plot = AdvisorPlot()
        self.summary = QLabel("no rounds yet")
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setWordWrap(True)
        self.whatif = QLabel("")
        self.whatif.setTextFormat(Qt.TextFormat.PlainText)
        self.whatif.setWordWrap(True)
        self.remeasure_button = QPushButton("Re-measure costs")
        self.remeasure_button.setToolTip("a full probe of T_t(n) and T_d(1) after the next round")
        self.remeasure_button.clicked.connect(self._remeasure)
        self.k_box = QSpinBox()
        self.k_box.setRange(1, 32)
        self.apply_button = QPushButton("Apply K")
        self.apply_button.clicked.connect(lambda: self.apply_k.emit(self.k_box.value()))
        top = QHBoxLayout()
        top.addWidget(self.remeasure_button)
        top.addStretch(1)
        top.addWidget(QLabel("K"))
        top.addWidget(self.k_box)
        top.addWidget(self.apply_button)

        layout = QVBoxLayout(self)
        layout.addWidget(self.plot, 3)
        layout.addWidget(self.summary)
        layout.addWidget(self.whatif)
        layout.addLayout(top)
        layout.addWidget(self._sweep_box(), 2)

    def _sweep_box(self) -> QGroupBox:
        box = QGroupBox("Sweep: every prompt at every K, interleaved")
        self.k_from, self.k_to = QSpinBox(), QSpinBox()
        for spin, value in ((self.k_from, 1), (self.k_to, 8)):
            spin.setRange(1, 32)
            spin.setValue(value)
        self.tokens = QSpinBox()
        self.tokens.setRange(4, 4096)
        self.tokens.setValue(64)
        self.prompt_set = QComboBox()
        self.prompt_set.addItem(SHIPPED)
        choose = QPushButton("Prompt file…")
        choose.clicked.connect(self._choose_prompts)
        self.sweep_button = QPushButton("Sweep")
        self.sweep_button.clicked.connect(self.start_sweep)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel_sweep)
        self.progress = QProgressBar()
        self.progress.setFormat("%v / %m runs")
        self.status = QLabel("")
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        # wrapped: a long refusal (a window on a served engine) must not widen the window
        self.status.setWordWrap(True)
        self.category = QComboBox()
        self.category.currentTextChanged.connect(self._show_table)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.itemSelectionChanged.connect(self._row_selected)
        self.runs = RunTable()
        self.runs.open_trace.connect(self.open_trace)

        row1 = QHBoxLayout()
        for widget in (QLabel("K from"), self.k_from, QLabel("to"), self.k_to):
            row1.addWidget(widget)
        row1.addWidget(QLabel("tokens per run"))
        row1.addWidget(self.tokens)
        row1.addWidget(self.prompt_set, 1)
        row1.addWidget(choose)
        row2 = QHBoxLayout()
        row2.addWidget(self.sweep_button)
        row2.addWidget(self.cancel_button)
        row2.addWidget(self.progress, 1)
        row3 = QHBoxLayout()
        row3.addWidget(QLabel("category"))
        row3.addWidget(self.category, 1)
        layout = QVBoxLayout(box)
        layout.addLayout(row1)
        layout.addLayout(row2)
        layout.addWidget(self.status)
        layout.addLayout(row3)
        tables = QHBoxLayout()
        tables.addWidget(self.table, 1)
        tables.addWidget(self.runs, 1)
        layout.addLayout(tables)
        return box

    # ----------------------------------------------------------------- the session's rounds

    def add_rounds(self, rounds: Sequence[Round]) -> None:
        """New round records of the session (in order): the advisor updates."""
        for rnd in rounds:
            self.model.add(rnd)
        self._redraw()

    def reset(self, rounds: Sequence[Round] = ()) -> None:
        """A new session (or a replayed trace): forget the old figures."""
        self.model = CostModel()
        self.add_rounds(rounds)

    def set_settings(self, settings: Settings) -> None:
        self.settings = settings

    def set_drafting(self, drafter, policy) -> None:
        """The session's drafter and policy: what a sweep sweeps K of."""
        self.drafting = (drafter, policy)

    def set_runner(self, run_job: Callable[[SweepJob], None] | None) -> None:
        """What runs a sweep on the session's engine; None: no models to sweep with."""
        self.run_job = run_job

    def _remeasure(self) -> None:
        """Ask for a full probe after the next round. The figures keep the probes so far (as
        every other view of the session does): the new one joins their running medians."""
        self.remeasure.emit()
        self._redraw()

    def _redraw(self) -> None:
        fig = self.figures = self.model.figures()
        self.plot.set_curve(fig.curve, fig.best_k)
        self.plot.set_leviathan(leviathan_curve(fig.alpha, fig.costs.cost_ratio))
        self.plot.set_session_point(fig.k, None if fig.impossible else fig.speedup_measured)
        self.summary.setText(describe(fig))
        ks = range(1, fig.k or 0)
        self.whatif.setText(
            "what-if (an ESTIMATE from the first K' judged positions of each round): "
            + ", ".join(
                f"K'={w['k']} acceptance {_f(w['acceptance'], '{:.3f}')} "
                f"({_f(w['tokens_per_round'])} tokens/pass)"
                for w in (whatif_fates((r.fates for r in self.model.rounds), k) for k in ks)
            )
            if ks
            else ""
        )
        if advisor_sure(fig) and not self.table.selectedItems():
            self.k_box.setValue(fig.best_k)

    # -------------------------------------------------------------------------- the sweep

    def _choose_prompts(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Prompt set", "", "Prompt sets (*.jsonl *.json *.txt);;All files (*)"
        )
        if path:
            self.set_prompt_file(path)

    def set_prompt_file(self, path: str | None) -> None:
        """A JSONL or text prompt file for the next sweep (None: the shipped set)."""
        self._prompt_file = path
        if path is None:
            self.prompt_set.setCurrentIndex(0)
            return
        if self.prompt_set.findText(path) < 0:
            self.prompt_set.addItem(path)
        self.prompt_set.setCurrentText(path)

    @property
    def sweeping(self) -> bool:
        return self._sweep_id != 0

    def start_sweep(self) -> bool:
        """Start a sweep with the panel's settings; False (and a message) if it cannot."""
        if self.sweeping:
            return False
        if self.run_job is None:
            self.status.setText("no models to sweep with: open a model pair first")
            return False
        lo, hi = sorted((self.k_from.value(), self.k_to.value()))
        path = self.prompt_set.currentText()
        try:
            prompts = load_prompt_set(None if path == SHIPPED else path)
            s = self.settings
            config = SweepConfig(
                ks=tuple(range(lo, hi + 1)),
                # the session's sampling and seed; the panel's own length
                settings=Settings(
                    temperature=s.temperature,
                    top_k=s.top_k,
                    top_p=s.top_p,
                    max_new_tokens=self.tokens.value(),
                    seed=s.seed,
                ),
                drafter=self.drafting[0],
                policy=self.drafting[1],
                verifier=s.verifier,
            )
        except (PromptSetError, ValueError) as e:
            self.status.setText(str(e))
            return False
        self._sweep_id = next(self._ids)
        if self._traces is None:
            self._traces = tempfile.TemporaryDirectory(prefix="specviz-tune-")
        trace_dir = f"{self._traces.name}/sweep-{self._sweep_id}"
        try:
            Path(trace_dir).mkdir()
        except OSError as e:
            self._sweep_id = 0
            self.status.setText(f"cannot write the runs' traces: {e}")
            return False
        self.result = SweepResult(total=config.n_runs(len(prompts)))
        self.progress.setRange(0, self.result.total)
        self.progress.setValue(0)
        self.status.setText(
            f"sweeping K = {lo}..{hi} over {len(prompts)} prompts, drafting with "
            f"{swept_drafting(*self.drafting)}; the session is paused until it ends (the two "
            "would slow each other's timings)"
        )
        self._set_running(True)
        self._job = SweepJob(
            self._sweep_id, prompts, config, trace_dir,
            self._progress.emit, self._finished.emit, self._failed.emit,
        )  # fmt: skip
        self.run_job(self._job)  # queued: it runs on the engine's thread
        return True

    def cancel_sweep(self) -> None:
        if self.sweeping and self._job is not None:
            self._job.cancel()
            self.status.setText("cancelling after the round in progress…")

    def _set_running(self, running: bool) -> None:
        self.sweep_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.sweep_running.emit(running)

    def _on_progress(self, sweep_id: int, done: int, total: int, run) -> None:
        if sweep_id != self._sweep_id:
            return  # a superseded sweep
        self.result.runs.append(run)
        self.progress.setValue(done)
        self._update_tables()

    def _on_finished(self, sweep_id: int, result: SweepResult) -> None:
        if sweep_id != self._sweep_id:
            return
        self.result = result
        self._sweep_id = 0
        self._set_running(False)
        self._update_tables()
        done = f"{len(result.runs)} of {result.total} runs"
        ended = f"cancelled: {done}" if result.cancelled else f"done: {done}"
        self.status.setText(ended + fastest_words(self.tables.get("overall")))

    def _on_failed(self, sweep_id: int, message: str) -> None:
        if sweep_id != self._sweep_id:
            return
        self._sweep_id = 0
        self._set_running(False)
        self.status.setText(f"the sweep failed: {message}")

    def _update_tables(self) -> None:
        runs = self.result.runs if self.result else []
        self.tables = tables_by_category(runs) if runs else {}
        current = self.category.currentText()
        self.category.blockSignals(True)
        self.category.clear()
        self.category.addItems(list(self.tables))
        if current in self.tables:
            self.category.setCurrentText(current)
        self.category.blockSignals(False)
        self._show_table(self.category.currentText())
        overall = self.tables.get("overall")
        points = [] if overall is None else [
            (r.k, r.comparable)  # a figure too noisy alone is drawn: the table says so
            for r in overall.rows
            if r.comparable is not None
        ]  # fmt: skip
        self.plot.set_sweep(points, () if overall is None else overall.curve)

    def _show_table(self, name: str) -> None:
        table = self.tables.get(name)
        rows = table.rows if table is not None else ()
        self.table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            measured = r.speedup.short()
            cells = (
                str(r.k),
                _f(r.alpha, "{:.3f}"),
                _f(r.tokens_per_pass),
                measured,
                _f(r.speedup_refined, "{:.2f}x"),
                _f(r.speedup_leviathan, "{:.2f}x"),
                _f(r.ratio),
            )
            for j, text in enumerate(cells):
                self.table.setItem(i, j, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        overall = self.tables.get("overall")
        runs = self.result.runs if self.result is not None and overall is not None else []
        if name != "overall":
            category = "overall" if name == "overall (category)" else name
            runs = [r for r in runs if r.category == category]
        self.runs.set_rows(prompt_rows(runs, overall.costs) if runs else [])

    def _row_selected(self) -> None:
        rows = {i.row() for i in self.table.selectedItems()}
        if len(rows) == 1:
            self.k_box.setValue(int(self.table.item(rows.pop(), 0).text()))

    def shutdown(self) -> None:
        """Cancel the sweep in progress (call before the panel goes away)."""
        if self._job is not None:
            self._job.cancel()
            self._job = None
            self._sweep_id = 0
        if self._traces is not None:  # a replayed trace is in memory: nothing reads these
            self._traces.cleanup()
            self._traces = None
