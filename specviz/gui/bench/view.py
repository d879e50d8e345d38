"""Tools > Bench results: a `specviz bench --json` file as bars per category, one colour per
configuration, with their 95% intervals, as Spec-Bench's leaderboard draws them. GUI
thread only; the numbers are the file's (core.bench.table.rows_from_json)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from specviz.core.bench.table import OVERALL, BenchRow, rows_from_json
from specviz.gui.bench import start_folder

# One colour per configuration, in order (colour-blind-safe, Okabe and Ito).
COLOURS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442")
METRICS = {"speedup": ("speedup", "speedup_ci", "speedup vs the target alone"),
           "#MAT": ("mat", "mat_ci", "#MAT (tokens per target pass)"),
           "alpha": ("alpha", "alpha_ci", "alpha (accepted / judged drafts)")}  # fmt: skip
MAX_FILE = 16 << 20


def load_rows(path: str) -> list[BenchRow]:
    """The rows of a bench JSON file; ValueError with a line for the user."""
    from specviz.core.resources import read_text_bounded

    try:
        obj = json.loads(read_text_bounded(path, MAX_FILE))
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{Path(path).name}: cannot read it ({e})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{Path(path).name}: not JSON ({e.msg}, line {e.lineno})") from None
    try:
        return rows_from_json(obj)
    except ValueError as e:
        raise ValueError(f"{Path(path).name}: {e}") from None


class BenchView(QWidget):
    """Bars per category (overall last), a group per category, a bar per configuration."""

    def __init__(self, rows: list[BenchRow], title: str = "", parent=None):
        super().__init__(parent)
        self.setWindowTitle(f"specviz: bench results {title}".strip())
        self.rows = rows
        self.categories = [c for c in dict.fromkeys(r.category for r in rows) if c != OVERALL]
        self.categories += [OVERALL] if any(r.category == OVERALL for r in rows) else []
        self.configs = list(dict.fromkeys(r.config for r in rows))
        self._at = {(r.category, r.config): r for r in rows}
        self.metric_box = QComboBox()
        self.metric_box.addItems(list(METRICS))
        self.metric_box.currentTextChanged.connect(self.show_metric)
        top = QHBoxLayout()
        top.addWidget(QLabel("Show"))
        top.addWidget(self.metric_box)
        top.addStretch(1)
        self.note = QLabel()
        self.note.setTextFormat(Qt.TextFormat.PlainText)  # names come from a file
        top.addWidget(self.note)
        self.plot = pg.PlotWidget(background="w")
        self.plot.setMenuEnabled(False)
        self.plot.showGrid(y=True, alpha=0.2)
        self.legend = self.plot.addLegend(offset=(-10, 10))
        n = max(len(self.configs), 1)
        self.bar_width = 0.8 / n
        self.bars: list[pg.BarGraphItem] = []
        self.errors: list[pg.ErrorBarItem] = []
        base = np.arange(len(self.categories), dtype=float)
        for i, config in enumerate(self.configs):
            x = base - 0.4 + self.bar_width * (i + 0.5)
            colour = COLOURS[i % len(COLOURS)]
            bar = pg.BarGraphItem(x=x, height=np.zeros(len(x)), width=self.bar_width * 0.9,
                                  brush=colour, pen=pg.mkPen(colour))  # fmt: skip
            error = pg.ErrorBarItem(x=x, y=np.zeros(len(x)), top=np.zeros(len(x)),
                                    bottom=np.zeros(len(x)), beam=self.bar_width * 0.4,
                                    pen=pg.mkPen("#333333"))  # fmt: skip
            self.plot.addItem(bar)
            self.plot.addItem(error)
            self.legend.addItem(bar, config)
            self.bars.append(bar)
            self.errors.append(error)
        self.one = pg.InfiniteLine(pos=1.0, angle=0, pen=pg.mkPen("#888888", style=Qt.DashLine))
        self.plot.addItem(self.one)
        axis = self.plot.getAxis("bottom")
        axis.setTicks([[(float(i), c) for i, c in enumerate(self.categories)]])
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.plot, 1)
        self.show_metric(self.metric_box.currentText())

    def values(self, metric: str, config: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(heights, lows, highs) per category for one configuration (NaN: not measured)."""
        key, ci_key, _ = METRICS[metric]
        heights, lows, highs = [], [], []
        for category in self.categories:
            row = self._at.get((category, config))
            value = None if row is None else getattr(row, key)
            ci = None if row is None else getattr(row, ci_key)
            heights.append(np.nan if value is None else value)
            lows.append(np.nan if ci is None else ci[0])
            highs.append(np.nan if ci is None else ci[1])
        return np.array(heights), np.array(lows), np.array(highs)

    def show_metric(self, metric: str) -> None:
        top = 1.0
        for config, bar, error in zip(self.configs, self.bars, self.errors, strict=True):
            heights, lows, highs = self.values(metric, config)
            shown = np.nan_to_num(heights)
            bar.setOpts(height=shown)
            has = np.isfinite(lows) & np.isfinite(highs)
            error.setData(
                y=shown, top=np.where(has, highs - shown, 0), bottom=np.where(has, shown - lows, 0)
            )
            finite = np.concatenate([heights[np.isfinite(heights)], highs[np.isfinite(highs)]])
            top = max(top, float(finite.max()) if len(finite) else 0.0)
        self.one.setVisible(metric == "speedup")
        self.plot.setLabel("left", METRICS[metric][2])
        self.plot.setYRange(0, top * 1.1, padding=0)
        self.plot.setXRange(-0.6, len(self.categories) - 0.4, padding=0)
        self.note.setText("bars: the file's figures; whiskers: 95% intervals over questions")


class BenchResults:
    """Tools > Bench results: pick a `specviz bench --json` file, open its view (each view
    a window of its own, kept until closed)."""

    def __init__(self, parent: QWidget):
        self.parent = parent
        self.views: list[BenchView] = []
        self.folder = ""

    def open_dialog(self) -> None:
        from specviz.gui import dialogs

        path = dialogs.open_path(
            self.parent, "Open bench results: the file `specviz bench --json > FILE` wrote",
            start_folder(self.folder, "bench"),
            "Bench results, specviz bench --json (*.json);;All files (*)",
        )  # fmt: skip
        if path:
            self.open(path)

    def open(self, path: str) -> BenchView | None:
        from specviz.gui import dialogs

        self.folder = str(Path(path).parent)
        try:
            rows = load_rows(path)
        except ValueError as e:
            dialogs.error(self.parent, "Could not open the bench results", str(e))
            return None
        view = BenchView(rows, f"({Path(path).name})")
        view.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        view.destroyed.connect(lambda *_: self.views.remove(view) if view in self.views else None)
        view.resize(960, 540)
        view.show()
        self.views.append(view)
        return view
