"""The plots column's fifth plot in a tree session: acceptance at each depth of the tree
(accepted / tried nodes there), the share of rounds whose accepted path reached each depth,
and tokens per target pass in its title. Numbers from core.metrics.positions.DepthCounts
(the rounds' tree records, counted as every acceptance by position is). Made once;
attached under the other plots only while the session has trees, so a chain session's plots
are as they always were. GUI thread only.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QGraphicsItem

from specviz.core.metrics.positions import DepthCounts
from specviz.gui import palette
from specviz.gui.plots.plot_kit import cache_axes, fix_axis_width
from specviz.gui.plots.round_plots import LEGEND_PT, MIN_HEIGHT, PLOTS, Plots
from specviz.gui.tooltips import show_plain

TITLE = "Tree: acceptance by depth"  # then tokens per target pass, in short
HEIGHT = 190  # the plots column grows by this much (it scrolls) while the plot is shown


class DepthPlot:
    """Per-depth acceptance of a tree session, drawn in `plots`' graphics layout."""

    def __init__(self, plots: Plots):
        self.plots = plots
        self.counts = DepthCounts()
        self.panel = pg.GraphicsLayout()
        self.plot = plot = self.panel.addPlot(row=0, col=0)
        plot.setTitle(TITLE, size="9pt")
        plot.showGrid(x=False, y=True, alpha=0.2)
        plot.setMenuEnabled(False)
        plot.setMouseEnabled(x=False, y=False)
        plot.hideButtons()
        plot.setLabel("bottom", "depth (1 = a child of the context)")
        plot.setLabel("left", "rate")
        for side in ("left", "bottom"):
            plot.getAxis(side).enableAutoSIPrefix(False)
        fix_axis_width(plot.getAxis("left"), "00000")  # as the plots above: axes line up
        cache_axes(plot)
        plot.setYRange(0, 1.1, padding=0)
        self.bars = pg.BarGraphItem(
            x=[], height=[], width=0.6, brush=palette.PLOT_ACCEPTANCE, pen=pg.mkPen(None)
        )
        self.bars.legend_name = "accepted / tried"
        plot.addItem(self.bars)
        self.reached = plot.plot(
            [], [], pen=pg.mkPen(palette.PLOT_PER_FORWARD, width=2), symbol="o", symbolSize=6,
            symbolBrush=palette.PLOT_PER_FORWARD, symbolPen=None,
        )  # fmt: skip
        self.reached.legend_name = "rounds reaching it"
        legend = pg.LegendItem(colCount=2, labelTextSize=f"{LEGEND_PT}pt", verSpacing=-8,
                               horSpacing=6)  # fmt: skip
        legend.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations, False)
        self.panel.addItem(legend, row=1, col=0)
        for item in (self.bars, self.reached):
            legend.addItem(item, item.legend_name)
        self.shown = False
        self._depths = -1
        plots.graphics.scene().sigMouseMoved.connect(self._hover)

    def set_shown(self, on: bool) -> None:
        """Attach the plot under the others (a tree session) or take it out (a chain's)."""
        if on == self.shown:
            return
        self.shown = on
        graphics = self.plots.graphics
        if on:
            graphics.addItem(self.panel, row=len(PLOTS), col=0)
            graphics.setMinimumHeight(MIN_HEIGHT + HEIGHT)
        else:
            graphics.removeItem(self.panel)
            graphics.setMinimumHeight(MIN_HEIGHT)

    def clear(self) -> None:
        self.counts = DepthCounts()
        self.redraw()

    def add(self, rnd) -> None:
        self.counts.add(rnd)

    def title(self) -> str:
        per_pass = self.counts.tokens_per_pass
        if per_pass is None:
            return TITLE
        return f"{TITLE} \u00b7 {per_pass:.2f} tokens/pass"

    def redraw(self) -> None:
        counts = self.counts
        rates = [np.nan if r is None else r for r in counts.by_position]
        x = np.arange(1, len(rates) + 1, dtype=float)
        self.bars.setOpts(x=x, height=np.nan_to_num(np.array(rates, dtype=float)))
        self.reached.setData(x, np.array(counts.reached, dtype=float))
        title = self.title()
        if self.plot.titleLabel.text != title:
            self.plot.setTitle(title, size="9pt")
        if self._depths != len(rates):  # the axis and its ticks only when the depths change
            self._depths = len(rates)
            self.plot.setXRange(0.4, max(len(rates), 1) + 0.6, padding=0)
            ticks = [(float(d), str(d)) for d in range(1, len(rates) + 1)]
            self.plot.getAxis("bottom").setTicks([ticks])

    def describe(self, x: float) -> str:
        """The hover text at depth round(x) ("" if none)."""
        d = int(round(x))
        counts = self.counts
        if not 1 <= d <= len(counts.tried):
            return ""
        rate = counts.by_position[d - 1]
        shown = "n/a" if rate is None else f"{rate:.3f}"
        return (
            f"depth {d}: {shown} accepted ({counts.accepted[d - 1]} of "
            f"{counts.tried[d - 1]} nodes tried there)\n"
            f"the accepted path reached depth {d} in {counts.accepted[d - 1]} of "
            f"{counts.rounds} rounds\n"
            f"tokens per target pass: {counts.tokens_per_pass:.2f} (emitted / rounds)"
        )

    def _hover(self, pos: QPointF) -> None:
        if self.shown and self.plot.vb.sceneBoundingRect().contains(pos):
            text = self.describe(self.plot.vb.mapSceneToView(pos).x())
            show_plain(QCursor.pos(), text, self.plots.graphics)
