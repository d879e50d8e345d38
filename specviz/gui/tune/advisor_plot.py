"""The advisor's plot: predicted speedup against K (refined, and Leviathan's for comparison),
the best K marked, the session's own measured point and a sweep's measured points.

Plot items are created once and updated with setData. Every number comes from
core.metrics.costmodel / core.tune. GUI thread only.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyqtgraph as pg

from specviz.gui import palette

REFINED = palette.P  # the refined prediction: the advisor's curve
LEVIATHAN = "#8a8a8a"  # Leviathan et al.'s formula, for comparison
MEASURED = "#1b7a2e"  # measured speedups (sweep points, the session's point)
BEST = "#c25e00"  # the advisor's best K


class AdvisorPlot(pg.PlotWidget):
    """Speedup over the target alone against K. GUI thread only."""

    def __init__(self, parent=None):
        super().__init__(parent, background="w")
        self.setMenuEnabled(False)
        self.setMouseEnabled(False, False)
        self.setLabel("bottom", "K (drafted tokens per round)")
        self.setLabel("left", "speedup (x)")
        self.showGrid(x=True, y=True, alpha=0.2)
        # the legend under the axis, in two columns: inside the plot it covered the points
        item = self.getPlotItem()
        self.legend = item.legend = pg.LegendItem(offset=None, colCount=2)
        item.layout.addItem(self.legend, 4, 1)
        self.setXRange(0.5, 16.5, padding=0)
        self.refined = self.plot(
            [], [], pen=pg.mkPen(REFINED, width=2), name="predicted (refined, cost model)"
        )
        self.leviathan = self.plot(
            [], [], pen=pg.mkPen(LEVIATHAN, width=1, style=pg.QtCore.Qt.PenStyle.DashLine),
            name="predicted (Leviathan et al.)",
        )  # fmt: skip
        self.best = self.plot(
            [], [], pen=None, symbol="star", symbolSize=16, symbolBrush=BEST, name="best K"
        )
        self.session = self.plot(
            [], [], pen=None, symbol="o", symbolSize=10, symbolBrush=MEASURED,
            name="measured (this session)",
        )  # fmt: skip
        self.sweep_curve = self.plot(
            [], [], pen=pg.mkPen("#2e7d9a", width=1.5, style=pg.QtCore.Qt.PenStyle.DotLine),
            name="predicted (refined, from the sweep)",
        )  # fmt: skip
        self.sweep = self.plot(
            [], [], pen=None, symbol="t", symbolSize=10, symbolBrush="#2e7d9a",
            name="measured (sweep)",
        )  # fmt: skip
        self.one = pg.InfiniteLine(pos=1.0, angle=0, pen=pg.mkPen("#bbbbbb", width=1))
        self.addItem(self.one)

    @staticmethod
    def _xy(points: Sequence[tuple[int, float]]) -> tuple[list[float], list[float]]:
        return [float(k) for k, _ in points], [float(v) for _, v in points]

    def set_curve(self, refined: Sequence[tuple[int, float]], best_k: int | None) -> None:
        self.refined.setData(*self._xy(refined))
        best = [(k, v) for k, v in refined if k == best_k]
        self.best.setData(*self._xy(best))

    def set_leviathan(self, points: Sequence[tuple[int, float]]) -> None:
        self.leviathan.setData(*self._xy(points))

    def set_session_point(self, k: int | None, speedup: float | None) -> None:
        """The session's measured speedup at its K; None (not measured, or impossible)
        hides it: an impossible value is never drawn as a measurement."""
        points = [(k, speedup)] if k is not None and speedup is not None else []
        self.session.setData(*self._xy(points))

    def set_sweep(
        self, points: Sequence[tuple[int, float]], curve: Sequence[tuple[int, float]] = ()
    ) -> None:
        """A sweep's measured speedups (possible ones only) and its pooled refined curve."""
        self.sweep.setData(*self._xy(points))
        self.sweep_curve.setData(*self._xy(curve))


def fastest_words(table) -> str:
    """' · fastest measured: K 4 (1.31x [1.22-1.41])' for a sweep's overall table
    (core.tune.table.SweepTable): its best measured K, with the drafter, policy and rule
    when several were swept; '' before any K has a figure."""
    if table is None or table.best is None:
        return ""
    *combo, k = table.best
    row = next(r for r in table.rows if list(r.combo) == combo and r.k == k)
    what = ", ".join(combo) + ", " if len({r.combo for r in table.rows}) > 1 else ""
    return f" \u00b7 fastest measured: {what}K {k} ({row.speedup.short()})"
