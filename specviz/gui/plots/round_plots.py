"""Per-round plots: acceptance (per round, running, alpha), speedup (measured by the cost
model, the refined and Leviathan predictions, tokens per target pass and K on a second
axis), the histogram of accepted length and acceptance by position.

Every plot item is created once; each round appends one point to preallocated arrays and
calls setData on views of them (clipped to the view and downsampled when long), so no
widget is rebuilt and no Python loop runs over past rounds. Numbers come from
`specviz.core.metrics.running`. GUI thread only.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from pyqtgraph import exporters
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QCursor, QImage, QPainter
from PySide6.QtWidgets import QFrame, QGraphicsItem, QScrollArea, QVBoxLayout, QWidget

from specviz.core.metrics.running import RoundStats, RunningStats
from specviz.gui import palette
from specviz.gui.plots.plot_kit import (
    COARSE,
    Series,
    StickyRange,
    cache_axes,
    fix_axis_width,
    one_point_per_pixel,
    svg_closed_paths,
)
from specviz.gui.tooltips import show_plain

PLOTS = ("acceptance", "speedup", "accepted_length", "by_position")
TITLES = {
    "acceptance": "Acceptance rate (accepted / judged)",
    "speedup": "Speedup; tokens per target pass",
    "accepted_length": "Accepted drafts per round",
    "by_position": "Acceptance by draft position",
}
SYMBOL_ROUNDS = 200  # the per-round acceptance has a marker per point up to this many rounds
MIN_HEIGHT = 760  # below this the plots scroll (legible at 1280 x 720)


# NOISY: the app draws antialiased (gui.app), but an antialiased dashed or dotted pen, or a
# per-round series that jumps between 0 and 1 (peak-downsampled to a band of long vertical
# strokes), made a Step's plot paint 23 ms of CPU at round 2,000 against 9 ms without
# (benchmarks/gui_redraw.py --as-app --phases): those curves are drawn without it; the
# running curves (solid, 3 px) keep it.
def _curve(plot: pg.PlotItem, name: str, colour: str, style=None, width: float = 2, **kw):
    pen = pg.mkPen(colour, width=width, style=style) if style else pg.mkPen(colour, width=width)
    if style:
        kw.setdefault("antialias", False)  # NOISY
    curve = plot.plot([], [], pen=pen, connect="finite", **kw)
    curve.legend_name = name
    one_point_per_pixel(curve)
    return curve


LEGEND_PT = 8  # the legends' label size on screen


def _legend(layout: pg.GraphicsLayout, curves: list[tuple[object, str]]):
    """A two-column legend in the row under a plot (its panel's): it never hides data, and
    a panel's export includes it."""
    legend = pg.LegendItem(colCount=2, labelTextSize=f"{LEGEND_PT}pt", verSpacing=-8, horSpacing=6)
    # In a layout row, not anchored over the plot: it may scale with the scene, so that an
    # export at twice the size has its legend twice as large, as the axes.
    legend.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations, False)
    layout.addItem(legend, row=1, col=0)
    for curve, name in curves:
        legend.addItem(curve, name)
    return legend


def count_ticks(high: float, most: int = 5) -> list[tuple[float, str]]:
    """Whole-number ticks from 0 to `high`, a 1-2-5 step apart, at most `most` + 1 of them."""
    step = 1
    while high / step > most:
        step = step * 5 // 2 if str(step)[0] == "2" else step * 2
    return [(float(v), str(v)) for v in range(0, int(high) + 1, step)]


class Plots(QWidget):
    """The four plots of a session; `add(round_stats, running)` after each round."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        dash, dot = Qt.PenStyle.DashLine, Qt.PenStyle.DotLine
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setMinimumHeight(MIN_HEIGHT)
        scroll = QScrollArea()
        scroll.setWidget(self.graphics)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(scroll)
        self.plots: dict[str, pg.PlotItem] = {}
        # each plot with its legend: what an export writes
        self.panels: dict[str, pg.GraphicsLayout] = {}
        for row, name in enumerate(PLOTS):
            panel = self.graphics.addLayout(row=row, col=0)
            plot = panel.addPlot(row=0, col=0)
            plot.setTitle(TITLES[name], size="9pt")
            plot.showGrid(x=True, y=True, alpha=0.2)
            plot.setMenuEnabled(True)
            for side in ("left", "bottom"):
                plot.getAxis(side).enableAutoSIPrefix(False)
            fix_axis_width(plot.getAxis("left"), "00000")  # 0.75, 1.25, 2000 (rounds)
            cache_axes(plot)
            self.plots[name] = plot
            self.panels[name] = panel
        self.graphics.scene().sigMouseMoved.connect(self._hover)

        acc = self.plots["acceptance"]
        acc.setLabel("bottom", "round")
        acc.setLabel("left", "rate")
        acc.setYRange(0, 1.1, padding=0)  # room for a marker at 1.0
        self.acceptance_round = _curve(
            acc, "this round", palette.PLOT_ACCEPTANCE, width=1,
            symbol="o", symbolSize=4, symbolBrush=palette.PLOT_ACCEPTANCE, symbolPen=None,
            antialias=False,  # NOISY
        )  # fmt: skip
        self.acceptance_round.setOpacity(0.45)
        self.acceptance_running = _curve(acc, "running", palette.PLOT_ACCEPTANCE, 0, 3)
        self.alpha_running = _curve(acc, "\u03b1 (mean \u03a3 min(p, q))", palette.PLOT_ALPHA, dash)
        self.efficiency = _curve(acc, "draft efficiency", palette.PLOT_EFFICIENCY, dot)

        speed = self.plots["speedup"]
        speed.setLabel("bottom", "round")
        speed.setLabel("left", "\u00d7 target alone")
        speed.addItem(pg.InfiniteLine(pos=1.0, angle=0, pen=pg.mkPen("#bbbbbb", style=dash)))
        self.speedup_measured = _curve(speed, "measured", palette.PLOT_MEASURED, 0, 3)
        # The measured speedup's 95% interval: a band between two unseen curves.
        self.speedup_low = speed.plot([], [], pen=None, connect="finite")
        self.speedup_high = speed.plot([], [], pen=None, connect="finite")
        self.speedup_low.legend_name, self.speedup_high.legend_name = "95% low", "95% high"
        band = pg.mkColor(palette.PLOT_MEASURED)
        band.setAlpha(48)
        self.speedup_band = pg.FillBetweenItem(self.speedup_low, self.speedup_high, brush=band)
        speed.addItem(self.speedup_band)
        self.speedup_predicted = _curve(speed, "refined (pred.)", palette.PLOT_PREDICTED, dash)
        self.speedup_leviathan = _curve(speed, "Leviathan (pred.)", palette.PLOT_PREDICTED, dot)
        # A measured value above K + 1 is impossible: a hollow marker, not a point of the line.
        self.speedup_impossible = speed.plot(
            [], [], pen=None, symbol="o", symbolSize=9, symbolBrush=None,
            symbolPen=pg.mkPen(palette.PLOT_MEASURED, width=1.5),
        )  # fmt: skip
        self.speedup_impossible.legend_name = "impossible"
        # Tokens per target pass is another quantity: its own axis, on the right.
        self.per_forward_view = pg.ViewBox(enableMenu=False)
        self.per_forward_view.setParentItem(speed)  # drawn and exported with the plot
        self.per_forward_view.setXLink(speed)
        self.per_forward_view.setMouseEnabled(x=False, y=False)
        right = speed.getAxis("right")
        speed.showAxis("right")
        right.linkToView(self.per_forward_view)
        right.setLabel("tokens / pass", color=palette.PLOT_PER_FORWARD)
        right.enableAutoSIPrefix(False)
        fix_axis_width(right, "000")
        right.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.per_forward = pg.PlotDataItem(
            [],
            [],
            pen=pg.mkPen(palette.PLOT_PER_FORWARD, width=2),
            connect="finite",
            antialias=False,  # NOISY
        )
        self.per_forward.legend_name = "tokens / pass (right)"
        self.per_forward.setDownsampling(auto=True, method="peak")
        one_point_per_pixel(self.per_forward)
        self.per_forward.setClipToView(True)
        self.per_forward_view.addItem(self.per_forward)
        self.k_curve = pg.PlotDataItem(
            [], [], pen=pg.mkPen(palette.PLOT_PER_FORWARD, width=1, style=dash),
            connect="finite",
        )  # fmt: skip
        self.k_curve.legend_name = "K (right)"
        self.per_forward_view.addItem(self.k_curve)
        speed.vb.sigResized.connect(lambda: self.per_forward_view.setGeometry(speed.vb.geometry()))

        for name, curves in (
            ("acceptance", (self.acceptance_round, self.acceptance_running, self.alpha_running,
                            self.efficiency)),
            ("speedup", (self.speedup_measured, self.speedup_predicted, self.speedup_leviathan,
                         self.speedup_impossible, self.per_forward, self.k_curve)),
        ):  # fmt: skip
            _legend(self.panels[name], [(c, c.legend_name) for c in curves])

        lengths = self.plots["accepted_length"]
        lengths.setLabel("bottom", "accepted drafts in the round")
        lengths.setLabel("left", "rounds")
        self.length_bars = pg.BarGraphItem(
            x=[], height=[], width=0.8, brush=palette.PLOT_HISTOGRAM, pen=pg.mkPen(None)
        )
        lengths.addItem(self.length_bars)

        by_pos = self.plots["by_position"]
        by_pos.setLabel("bottom", "draft position (1 = first drafted)")
        by_pos.setLabel("left", "accepted / judged")
        by_pos.setYRange(0, 1.1, padding=0)  # room for a marker at 1.0
        self.position_bars = pg.BarGraphItem(
            x=[], height=[], width=0.8, brush=palette.PLOT_ALPHA, pen=pg.mkPen(None)
        )
        by_pos.addItem(self.position_bars)

        self.markers = []
        for name in ("acceptance", "speedup"):
            line = pg.InfiniteLine(angle=90, pen=pg.mkPen(palette.SELECTED, width=2))
            line.setVisible(False)
            self.plots[name].addItem(line)
            self.markers.append(line)
            self.plots[name].setDownsampling(auto=True, mode="peak")
            self.plots[name].setClipToView(True)

        self.curves = (  # in the order of RoundStats' figures in add()
            self.acceptance_round,
            self.acceptance_running,
            self.alpha_running,
            self.efficiency,
            self.speedup_measured,
            self.speedup_predicted,
            self.speedup_leviathan,
            self.speedup_impossible,
            self.per_forward,
            self.k_curve,
            self.speedup_low,
            self.speedup_high,
        )
        self._series = {curve: Series() for curve in self.curves}
        self._blank = set(self.curves)  # curves drawn with no points (setData costs ~0.1 ms)
        # y axes that move in steps (no auto-range: see plot_kit.StickyRange)
        self._y_ranges = {
            speed.vb: (StickyRange(0.0, 2.0), (*self.curves[4:8], *self.curves[10:])),
            self.per_forward_view: (StickyRange(0.0, 1.0), self.curves[8:10]),
            lengths.vb: (StickyRange(0.0, 1.0, 1.25, COARSE), ()),  # counts: 1-2-5 steps
        }
        for view, (sticky, _) in self._y_ranges.items():
            view.setYRange(sticky.low, sticky.high, padding=0)
        self._x_span = 10  # the round axes grow in steps: an axis repaints only when it moves
        self._bar_counts = (-1, -1)  # (accepted lengths, positions) the bar axes were set for
        self.rounds = 0
        self._running: RunningStats | None = None

    # ------------------------------------------------------------------------------ model

    def clear(self) -> None:
        for curve, series in self._series.items():
            series.clear()
            curve.setData([], [])
        self._blank = set(self.curves)
        self.length_bars.setOpts(x=[], height=[])
        self.position_bars.setOpts(x=[], height=[])
        for line in self.markers:
            line.setVisible(False)
        for name in ("acceptance", "speedup"):
            self.plots[name].setXRange(0, 10, padding=0.02)
        self._x_span = 10
        self._bar_counts = (-1, -1)
        self.rounds = 0
        self._running = None
        for view, (sticky, _) in self._y_ranges.items():
            sticky.reset()
            view.setYRange(sticky.low, sticky.high, padding=0)

    def add(
        self, stats: RoundStats, running: RunningStats, redraw: bool = True, speed=None
    ) -> None:
        """Append one round's figures (from metrics.running, and the speedups of a
        metrics.speed_tracker.SpeedPoint); redraw=False defers the drawing (a replay loads
        all its rounds, then calls redraw() once)."""
        x = float(stats.index + 1)  # rounds are counted from 1 on screen
        measured = refined = leviathan = impossible = k = None
        low = high = None
        if speed is not None:
            measured, refined, leviathan = speed.measured, speed.refined, speed.leviathan
            impossible, k = speed.impossible, speed.k
            if speed.band is not None and speed.speedup.status in ("ok", "noisy"):
                low, high = speed.band  # a noisy figure's band says how noisy
        values = (
            stats.acceptance,
            stats.acceptance_running,
            stats.alpha_running,
            stats.draft_efficiency,
            measured,
            refined,
            leviathan,
            impossible,
            stats.tokens_per_forward,
            k,
            low,
            high,
        )
        for series, value in zip(self._series.values(), values, strict=True):
            series.append(x, value)
        self._running = running
        self.rounds += 1
        if redraw:
            self.redraw()

    def redraw(self) -> None:
        last = next(iter(self._series.values())).n
        # A marker per round is drawn for every point in view: past a few hundred rounds
        # they merge into the line anyway, and their cost would grow with the session.
        symbol = "o" if last <= SYMBOL_ROUNDS else None
        if self.acceptance_round.opts["symbol"] != symbol:
            self.acceptance_round.setSymbol(symbol)
        for curve, series in self._series.items():
            if series.low is None:  # no value yet (often: impossible speedups, K): nothing
                if curve not in self._blank:
                    curve.setData([], [])
                    self._blank.add(curve)
                continue
            self._blank.discard(curve)
            if curve is self.speedup_impossible:  # markers only where there is a value
                keep = np.isfinite(series.y)
                curve.setData(series.x[keep], series.y[keep])
            else:
                curve.setData(series.x, series.y, connect="finite")
        if last > self._x_span or last < self._x_span // 3:
            self._x_span = max(10, 10 * math.ceil(last * 1.5 / 10))
            for name in ("acceptance", "speedup"):
                self.plots[name].setXRange(0, self._x_span, padding=0.02)
                self.plots[name].vb.updateMatrix()
        for view, (sticky, curves) in self._y_ranges.items():
            if curves:
                series = [self._series[c] for c in curves if self._series[c].low is not None]
                low = min((x.low for x in series), default=None)
                high = max((x.high for x in series), default=None)
            else:
                counts = self._running.accepted_lengths if self._running else ()
                low, high = 0.0, float(max(counts, default=0))
            if sticky.fit(low, high):
                view.setYRange(sticky.low, sticky.high, padding=0)
                view.updateMatrix()  # now, not in the paint (which would then paint again)
                if not curves:  # the histogram counts rounds: whole numbers on its axis
                    ticks = count_ticks(sticky.high, most=3)
                    self.plots["accepted_length"].getAxis("left").setTicks([ticks, []])
        running = self._running
        if running is None:
            return
        lengths = running.accepted_lengths
        self.length_bars.setOpts(x=np.arange(len(lengths), dtype=float), height=lengths)
        by_pos = [0.0 if v is None else v for v in running.acceptance_by_position]
        self.position_bars.setOpts(x=np.arange(1, len(by_pos) + 1, dtype=float), height=by_pos)
        if self._bar_counts != (len(lengths), len(by_pos)):  # axes and ticks only on change
            self._bar_counts = (len(lengths), len(by_pos))
            self.plots["accepted_length"].setXRange(-0.6, max(len(lengths), 2) - 0.4, padding=0)
            self.plots["by_position"].setXRange(0.4, max(len(by_pos), 1) + 0.6, padding=0)
            for name, count in (("accepted_length", len(lengths)), ("by_position", len(by_pos))):
                first = int(name == "by_position")
                self.plots[name].getAxis("bottom").setTicks(
                    [[(float(i + first), str(i + first)) for i in range(count)]]
                )

    def mark_round(self, index: int | None) -> None:
        """Show the selected round as a vertical line (None hides it)."""
        for line in self.markers:
            line.setVisible(index is not None)
            if index is not None:
                line.setValue(index + 1)

    def describe(self, name: str, x: float) -> str:
        """The values under the pointer at x on a plot (its hover text); "" if none."""
        i = int(round(x))
        if name in ("acceptance", "speedup"):
            curves = self.curves[:4] if name == "acceptance" else self.curves[4:]
            n = self._series[curves[0]].n
            if not 1 <= i <= n:
                return ""
            parts = []
            for curve in curves:
                value = self._series[curve].y[i - 1]
                shown = "n/a" if np.isnan(value) else f"{value:.3f}"
                parts.append(f"{curve.legend_name}: {shown}")
            return f"round {i}\n" + "\n".join(parts)
        running = self._running
        if running is None:
            return ""
        if name == "accepted_length":
            lengths = running.accepted_lengths
            if not 0 <= i < len(lengths):
                return ""
            drafted = running.rounds - running.undrafted
            none = f" ({running.undrafted} drafted nothing)" if running.undrafted else ""
            return f"{lengths[i]} of {drafted} rounds that drafted accepted {i} drafts{none}"
        by_pos = running.acceptance_by_position
        if not 1 <= i <= len(by_pos) or by_pos[i - 1] is None:
            return ""
        return (
            f"draft position {i}: {by_pos[i - 1]:.3f} accepted "
            f"({running.by_position_accepted[i - 1]} of {running.by_position_judged[i - 1]})"
        )

    def _hover(self, pos: QPointF) -> None:
        for name, plot in self.plots.items():
            if plot.vb.sceneBoundingRect().contains(pos):
                text = self.describe(name, plot.vb.mapSceneToView(pos).x())
                show_plain(QCursor.pos(), text, self.graphics)
                return

    def series(self, curve) -> tuple[np.ndarray, np.ndarray]:
        s = self._series[curve]
        return s.x.copy(), s.y.copy()

    def export(self, name: str, path: str | Path) -> None:
        """Write one plot to PNG or SVG, by the file's extension."""
        path = Path(path)
        item = self.panels[name]  # the plot and its legend
        suffix = path.suffix.lower()
        if suffix == ".svg":
            with svg_closed_paths():
                exporters.SVGExporter(item).export(str(path))
            return
        if suffix != ".png":
            raise ValueError(f"unknown plot format '{path.suffix}': use .png or .svg")
        # The scene drawn into an image twice the size (at least 800 pixels wide), on white
        # (pyqtgraph's ImageExporter leaves it transparent): every part scales alike.
        rect = item.sceneBoundingRect()
        scale = max(800 / max(rect.width(), 1.0), 2.0)
        image = QImage(int(rect.width() * scale), int(rect.height() * scale),
                       QImage.Format.Format_ARGB32)  # fmt: skip
        image.fill(QColor("white"))
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        item.scene().render(painter, QRectF(image.rect()), rect)
        painter.end()
        if not image.save(str(path)):
            raise OSError(f"could not write {path}")
