"""The accept test of one position as a gauge: the draw u against min(1, p/q), and alpha
against 1 - alpha. Numbers from core.metrics.position_bars.PositionBars. GUI thread only."""

from __future__ import annotations

import pyqtgraph as pg

from specviz.core.metrics.position_bars import PositionBars
from specviz.gui import palette
from specviz.gui.plots.plot_kit import cache_axes
from specviz.gui.stream.token_view import fmt


def _brush(colour: str, alpha: int = 255):
    c = pg.mkColor(colour)
    c.setAlpha(alpha)
    return pg.mkBrush(c)


class AcceptGauge(pg.PlotWidget):
    """u against min(1, p/q) (accepted below the line) and alpha | 1 - alpha."""

    def __init__(self, parent=None):
        super().__init__(parent)
        item = self.getPlotItem()
        cache_axes(item)
        item.setTitle("accept test", size="9pt")
        self.setToolTip(
            "Left: the draw u against min(1, p/q); u below the line means accepted.\n"
            "Right: \u03b1 = \u03a3 min(p, q), the chance a draft here is accepted, "
            "and 1 \u2212 \u03b1."
        )
        item.setMenuEnabled(False)
        item.hideButtons()
        self.setMouseEnabled(x=False, y=False)
        self._build()

    def _build(self) -> None:
        item = self.getPlotItem()
        item.setXRange(-0.6, 1.6, padding=0)
        item.setYRange(0, 1, padding=0.02)
        item.getAxis("bottom").setTicks([[(0, "u vs min(1,p/q)"), (1, "\u03b1 | 1\u2212\u03b1")]])
        item.setLabel("left", "probability")
        no_pen = pg.mkPen(None)
        self.accept_region = pg.BarGraphItem(
            x=[0], y0=[0], height=[0], width=0.8, brush=palette.ACCEPT_REGION, pen=no_pen
        )
        self.reject_region = pg.BarGraphItem(
            x=[0], y0=[0], height=[0], width=0.8, brush=palette.REJECT_REGION, pen=no_pen
        )
        self.alpha_item = pg.BarGraphItem(
            x=[1], y0=[0], height=[0], width=0.8, brush=_brush(palette.MIN_PQ, 200), pen=no_pen
        )
        self.rejection_item = pg.BarGraphItem(
            x=[1], y0=[0], height=[0], width=0.8, brush=_brush(palette.EXCESS, 200), pen=no_pen
        )
        self.threshold = pg.PlotDataItem([], [], pen=pg.mkPen(palette.U_MARK, width=3))
        self.u_mark = pg.ScatterPlotItem(
            [], [], symbol="d", size=16, brush=palette.SELECTED, pen=pg.mkPen(palette.U_MARK)
        )
        for bar in (
            self.accept_region,
            self.reject_region,
            self.alpha_item,
            self.rejection_item,
            self.threshold,
            self.u_mark,
        ):
            item.addItem(bar)
        self.accept_text = pg.TextItem(anchor=(0.5, 1), color=palette.U_MARK)
        self.alpha_text = pg.TextItem(anchor=(0.5, 0.5), color="#ffffff")
        for text in (self.accept_text, self.alpha_text):
            item.addItem(text)

    def draw(self, bars: PositionBars | None) -> None:
        a = None if bars is None else bars.accept_prob
        u = None if bars is None else bars.u
        self.accept_region.setOpts(height=[a or 0.0])
        self.reject_region.setOpts(y0=[a or 0.0], height=[0.0 if a is None else 1.0 - a])
        if a is None:
            self.threshold.setData([], [])
            note = {"bonus": "bonus token:\nnothing drafted", "discarded": "never judged"}
            self.accept_text.setText("" if bars is None else note.get(bars.kind, ""))
            self.accept_text.setPos(0, 0.45)
        else:
            self.threshold.setData([-0.45, 0.45], [a, a])
            self.accept_text.setText("")
        if u is None:
            self.u_mark.setData([], [])
        else:
            self.u_mark.setData([0.0], [u])
        alpha = None if bars is None else bars.alpha
        rejection = None if bars is None else bars.rejection_mass
        # the figures go in the tick labels, where the marks never cover them
        test = "u vs min(1,p/q)"
        if a is not None and u is not None:
            relation = "<" if bars.accepted else "\u2265"
            test = f"{fmt(u, 2)} {relation} {fmt(a, 2)}"  # the summary above has three digits
        split = (
            "\u03b1 | 1\u2212\u03b1" if alpha is None else f"{fmt(alpha, 2)} | {fmt(rejection, 2)}"
        )
        self.getPlotItem().getAxis("bottom").setTicks([[(0, test), (1, split)]])
        self.alpha_item.setOpts(height=[alpha or 0.0])
        self.rejection_item.setOpts(y0=[alpha or 0.0], height=[rejection or 0.0])
        if alpha is None:
            self.alpha_text.setText("")
        else:
            self.alpha_text.setText(f"\u03b1\n{fmt(alpha, 2)}")
            self.alpha_text.setPos(1, alpha / 2)
