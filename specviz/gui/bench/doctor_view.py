"""Tools > Engine metrics: an engine's record of speculative decoding (what `specviz doctor`
reads: vLLM's /metrics or log lines, SGLang's or llama.cpp's logs) in every engine's
definitions, its findings, and its per-position acceptance as bars beside the current
session's own. GUI thread only; a local file only (no URL is fetched from the window). The
reading and the figures are the command's and core's (cli.bench.doctor.read_source,
core.metrics.engine_metrics.read_record, core.bench.doctor.diagnose)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from specviz.core.bench.doctor import Diagnosis, diagnose, session_record
from specviz.core.metrics.engine_metrics import read_record
from specviz.gui.bench import start_folder
from specviz.gui.screen_fit import fit_to_screen

# (label, Diagnosis attribute, format, what each engine calls it)
FIGURES = (
    ("acceptance length, bonus counted", "acceptance_length", "{:.2f}",
     "vLLM mean acceptance length, SGLang accept len, Spec-Bench #MAT, specviz tokens/pass"),
    ("acceptance length, drafts only", "acceptance_length_no_bonus", "{:.2f}",
     "EAGLE's and Medusa's accepted drafts per step"),
    ("acceptance rate", "acceptance_rate", "{:.3f}",
     "vLLM draft acceptance rate, llama.cpp accept, SGLang accept rate, specviz draft "
     "efficiency"),
)  # fmt: skip
# (legend, whose, which curve, colour): Okabe and Ito; the engine blue, the session orange
SERIES = (
    ("engine, unconditional (vLLM's)", "engine", "per_position_unconditional", "#0072b2"),
    ("engine, conditional (specviz's)", "engine", "per_position_conditional", "#56b4e9"),
    ("this session, unconditional", "session", "per_position_unconditional", "#d55e00"),
    ("this session, conditional", "session", "per_position_conditional", "#e69f00"),
)
REFRESH_MS = 1000  # the session's bars follow its rounds at most this often


def load_diagnosis(path: str, cost_ratio: float | None = None) -> Diagnosis:
    """The diagnosis of a local metrics file or log; ValueError with a line for the user."""
    from specviz.cli.bench.doctor import read_source
    from specviz.cli.options import UsageError

    name = Path(path).name
    if "://" in path:
        raise ValueError(f"{name}: the window opens local files only (run `specviz doctor URL`)")
    try:
        return diagnose(read_record(read_source(path, 10.0)), cost_ratio)
    except UsageError as e:
        raise ValueError(str(e)) from None
    except ValueError as e:  # EngineRecordError: not a record, or counters that disagree
        raise ValueError(f"{name}: {e}") from None


def _label(text: str = "", wrap: bool = False) -> QLabel:
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)  # file names and counts come from a file
    label.setWordWrap(wrap)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def _f(value, fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)


def _curve(d: Diagnosis | None, attr: str) -> np.ndarray:
    values = getattr(d, attr) if d is not None else None
    return np.array([np.nan if v is None else v for v in values or ()], dtype=float)


class EngineMetricsView(QWidget):
    """The engine's figures beside this session's, its findings, and per-position bars."""

    def __init__(self, engine: Diagnosis, title: str = "",
                 session_stats: Callable[[], object] | None = None, parent=None):  # fmt: skip
        super().__init__(parent)
        from specviz.cli.bench.doctor import ENGINE_WORDS

        self.setWindowTitle(f"specviz: engine metrics {title}".strip())
        self.engine = engine
        self.session: Diagnosis | None = None
        self._session_stats = session_stats or (lambda: None)
        self._seen: object = ()  # nothing drawn yet
        r = engine.record
        counts = ", ".join(
            f"{name} {value:,.0f}"
            for name, value in (("drafts", r.drafts), ("draft tokens", r.draft_tokens),
                                ("accepted", r.accepted_tokens)) if value is not None
        )  # fmt: skip
        words = ENGINE_WORDS.get((r.engine, r.source), r.engine)
        unit = "interval" if r.source in ("log", "server-log") else "record"
        self.header = _label(
            f"{title.strip('()')}: {words}, {r.intervals} {unit}{'s' * (r.intervals != 1)}"
            + (f"; K {r.k}" if r.k else "") + (f"; {counts}" if counts else ""), wrap=True
        )  # fmt: skip
        grid = QGridLayout()
        grid.setHorizontalSpacing(12)
        for col, text in enumerate(("", "engine", "this session", "called")):
            grid.addWidget(_label(text), 0, col)
        self.values: dict[str, tuple[QLabel, QLabel]] = {}
        for row, (name, attr, fmt, called) in enumerate(FIGURES, 1):
            mine, theirs = _label(), _label(_f(getattr(engine, attr), fmt))
            grid.addWidget(_label(name), row, 0)
            grid.addWidget(theirs, row, 1)
            grid.addWidget(mine, row, 2)
            grid.addWidget(_label(called, wrap=True), row, 3)
            self.values[attr] = (theirs, mine)
        grid.setColumnStretch(3, 1)
        self.findings = [_label(f"[{f.code}] {f.message}", wrap=True) for f in engine.findings]
        self.best_k = _label(wrap=True)
        self.session_note = _label(wrap=True)
        left = QVBoxLayout()
        left.addLayout(grid)
        heading = _label("Findings")
        font = heading.font()
        font.setBold(True)
        heading.setFont(font)
        left.addWidget(heading)
        for label in self.findings:
            left.addWidget(label)
        left.addWidget(self.best_k)
        left.addWidget(self.session_note)
        left.addStretch(1)
        self.plot = pg.PlotWidget(background="w")
        self.plot.setMenuEnabled(False)
        self.plot.showGrid(y=True, alpha=0.2)
        self.plot.setLabel("left", "acceptance")
        self.plot.setLabel("bottom", "draft position (a tree's depth)")
        self.legend = self.plot.addLegend(offset=(-10, 10))
        self.bars = [pg.BarGraphItem(x=[], height=[], width=0.2, brush=c, pen=pg.mkPen(c))
                     for *_, c in SERIES]  # fmt: skip
        for bar in self.bars:
            self.plot.addItem(bar)
        self.empty = pg.TextItem("no per-position figures in this record", color="#555555")
        self.plot.addItem(self.empty)
        body = QHBoxLayout()
        panel = QWidget()
        panel.setLayout(left)
        panel.setMaximumWidth(560)
        body.addWidget(panel)
        body.addWidget(self.plot, 1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addLayout(body, 1)
        self.refresh_session()
        self.timer = QTimer(self)
        self.timer.timeout.connect(self.refresh_session)
        self.timer.start(REFRESH_MS)

    def refresh_session(self) -> None:
        """Read the session's running stats again; redraw when its rounds changed."""
        stats = self._session_stats()
        seen = None if stats is None else (id(stats), stats.rounds)
        if seen == self._seen:
            return
        self._seen = seen
        record = None if stats is None else session_record(stats)
        c = None if stats is None else stats.cost_ratio
        self.session = None if record is None else diagnose(record, c)
        for _name, attr, fmt, _ in FIGURES:
            self.values[attr][1].setText(_f(getattr(self.session, attr, None), fmt))
        if self.session is None:
            self.session_note.setText("No session with drafted rounds: the engine's curve alone.")
        else:
            codes = ", ".join(f.code for f in self.session.findings)
            self.session_note.setText(
                f"This session: {record.drafts:,.0f} rounds that drafted; its shape: {codes}."
            )
        engine_u = self.engine.per_position_unconditional
        if c is not None and engine_u:
            best = diagnose(self.engine.record, c)
            self.best_k.setText(
                f"Best K for the engine's curve at this session's c = {c:.3g} (the session's "
                f"pair, not necessarily the engine's): {best.best_k}, predicted "
                f"{best.best_speedup:.2f}x over positions 1..{len(engine_u)}."
            )
        else:
            self.best_k.setText("" if engine_u else "Best K: the record has no per-position "
                                "figures.")  # fmt: skip
        self._draw()

    def curves(self) -> list[np.ndarray | None]:
        """Each series' heights by position (None: that series is not shown)."""
        out = []
        for _, whose, attr, _ in SERIES:
            d = self.engine if whose == "engine" else self.session
            values = _curve(d, attr)
            out.append(values if len(values) else None)
        return out

    def _draw(self) -> None:
        curves = self.curves()
        shown = [i for i, c in enumerate(curves) if c is not None]
        n = max((len(curves[i]) for i in shown), default=0)
        width = 0.8 / max(len(shown), 1)
        self.legend.clear()
        for slot, i in enumerate(shown):
            heights = curves[i]
            x = np.arange(1, len(heights) + 1) - 0.4 + width * (slot + 0.5)
            self.bars[i].setOpts(x=x, height=np.nan_to_num(heights), width=width * 0.9)
            self.legend.addItem(self.bars[i], SERIES[i][0])
        for i, bar in enumerate(self.bars):
            bar.setVisible(i in shown)
        self.empty.setVisible(n == 0)
        self.empty.setPos(0.6, 0.5)
        self.plot.setYRange(0, 1.3, padding=0)  # room above 1 for the legend
        self.plot.setXRange(0.4, max(n, 1) + 0.6, padding=0)
        self.plot.getAxis("bottom").setTicks([[(float(i), str(i)) for i in range(1, n + 1)]])


class EngineMetrics:
    """Tools > Engine metrics: pick a saved /metrics page or log, open its view beside the
    window's session (each view a window of its own, kept until closed)."""

    def __init__(self, parent: QWidget, session_stats: Callable[[], object] | None = None):
        self.parent = parent
        self.session_stats = session_stats
        self.views: list[EngineMetricsView] = []
        self.folder = ""

    def open_dialog(self) -> None:
        from specviz.gui import dialogs

        path = dialogs.open_path(
            self.parent, "Open engine metrics: a vLLM /metrics page saved as text, or a vLLM, "
            "SGLang or llama.cpp server log", start_folder(self.folder, "engine-metrics"),
            "/metrics pages and server logs (*.txt *.log *.prom *.metrics);;All files (*)",
        )  # fmt: skip
        if path:
            self.open(path)

    def open(self, path: str) -> EngineMetricsView | None:
        from specviz.gui import dialogs

        self.folder = str(Path(path).parent)
        QGuiApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)  # a 64 MiB log: ~2 s
        try:
            diagnosis = load_diagnosis(path)
        except ValueError as e:
            diagnosis, problem = None, str(e)
        finally:
            QGuiApplication.restoreOverrideCursor()
        if diagnosis is None:
            dialogs.error(self.parent, "Could not read the engine metrics", problem)
            return None
        view = EngineMetricsView(diagnosis, f"({Path(path).name})", self.session_stats)
        view.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        view.destroyed.connect(lambda *_: self.views.remove(view) if view in self.views else None)
        fit_to_screen(view, 1280, 720)
        view.show()
        self.views.append(view)
        return view
