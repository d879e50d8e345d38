"""Grouped bar plots of the lab: several distributions side by side, one group per token.

Bar items are created once and updated with setOpts; the heights shown come from core.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QCursor, QFont

from specviz.core.metrics.position_bars import REST_LABEL
from specviz.gui import palette
from specviz.gui.tooltips import show_plain

# The lab's own shades, next to the shared palette: the residual and the un-warped
# distributions are lighter tints of the hues they derive from.
RESIDUAL = "#f0a35e"  # norm(max(0, p - q)): a tint of palette.EXCESS
P_RAW = "#a9c3ef"  # p before temperature / top-k / top-p: a tint of palette.P
Q_RAW = "#d5b3e3"  # q before warping: a tint of palette.Q
WRONG = "#c62828"  # the wrong rules' warning text
RIGHT = "#1b7a2e"

POSITION_SERIES = (
    ("p (target)", palette.P),
    ("q (draft)", palette.Q),
    ("min(p, q)", palette.MIN_PQ),
    ("max(0, p − q)", palette.EXCESS),
    ("residual", RESIDUAL),
)
HISTOGRAM_SERIES = (
    ("p (target)", palette.P),
    ("emitted (empirical)", palette.PLOT_HISTOGRAM),
    ("q (draft)", palette.Q),
)
WARPED_SERIES = (
    ("p raw", P_RAW),
    ("p warped", palette.P),
    ("q raw", Q_RAW),
    ("q warped", palette.Q),
)
GROUP_WIDTH = 0.84  # of the unit spacing between token groups


def show_token(text: str, limit: int = 9) -> str:
    """A token's text as a short axis label: spaces and line breaks made visible."""
    if text == REST_LABEL:
        return "(rest)"  # short enough to be drawn between its neighbours
    shown = text.replace(" ", "␣").replace("\n", "⏎").replace("\t", "⇥") or "∅"
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


class GroupedBars(pg.PlotWidget):
    """One bar per series for each token, side by side, with a legend. GUI thread only."""

    def __init__(
        self, series: Sequence[tuple[str, str]], y_label: str = "probability", parent=None
    ):
        super().__init__(parent, background="w")
        self.series = tuple(name for name, _ in series)
        self.labels: tuple[str, ...] = ()
        self.setMenuEnabled(False)
        self.setMouseEnabled(x=False, y=False)
        self.hideButtons()
        self.setMinimumHeight(120)  # the lab fits 1280 x 720
        item = self.getPlotItem()
        item.showGrid(y=True, alpha=0.25)
        font = QFont()
        font.setPointSize(8)
        for name in ("left", "bottom"):
            axis = self.getAxis(name)
            axis.setPen(pg.mkPen("#555555"))
            axis.setTextPen(pg.mkPen("#222222"))
            axis.setStyle(tickFont=font)
            axis.enableAutoSIPrefix(False)  # probabilities, not "x0.001" units
        self.setLabel("left", y_label, color="#222222")
        legend = self.addLegend(
            offset=(-6, 4), colCount=len(series), labelTextSize="8pt", labelTextColor="#222222"
        )
        legend.setBrush(pg.mkBrush(255, 255, 255, 220))
        self._width = GROUP_WIDTH / len(series)
        self.bars: list[pg.BarGraphItem] = []
        for name, colour in series:
            bar = pg.BarGraphItem(
                x=np.zeros(0),
                height=np.zeros(0),
                width=self._width,
                brush=colour,
                pen=colour,
                name=name,
            )
            self.addItem(bar)
            self.bars.append(bar)
        self.scene().sigMouseMoved.connect(self._hover)

    def set_values(self, labels: Sequence[str], values: Sequence[np.ndarray | None]) -> None:
        """Heights per series (None hides a series), one per label."""
        n = len(labels)
        base = np.arange(n, dtype=float)
        top = 0.0
        for i, (bar, heights) in enumerate(zip(self.bars, values, strict=True)):
            heights = np.zeros(n) if heights is None else np.asarray(heights, dtype=float)
            x = base - GROUP_WIDTH / 2 + self._width * (i + 0.5)
            bar.setOpts(x=x, height=heights)
            if heights.size:
                top = max(top, float(heights.max()))
        if tuple(labels) != self.labels:
            self.labels = tuple(labels)
            ticks = [(j, show_token(text)) for j, text in enumerate(labels)]
            self.getAxis("bottom").setTicks([ticks])
            self.setXRange(-0.6, max(n, 1) - 0.4, padding=0)
        # Head-room for the legend above the tallest bar.
        self.setYRange(0, max(top, 0.05) * 1.3, padding=0)

    def describe(self, group: int) -> str:
        """The hover text of one token's group: every series' value, with more digits."""
        if not 0 <= group < len(self.labels):
            return ""
        lines = [repr(self.labels[group])]
        for name, bar in zip(self.series, self.bars, strict=True):
            heights = bar.opts["height"]
            if group < len(heights):
                lines.append(f"{name}: {float(heights[group]):.4g}")
        return "\n".join(lines)

    def _hover(self, pos) -> None:
        view = self.getPlotItem().getViewBox()
        if not view.sceneBoundingRect().contains(pos):
            return
        text = self.describe(int(round(view.mapSceneToView(pos).x())))
        show_plain(QCursor.pos(), text, self)  # a token's text: never rich text

    def heights(self, series: int) -> np.ndarray:
        """The current heights of one series (for tests and readers)."""
        return np.asarray(self.bars[series].opts["height"], dtype=float)
