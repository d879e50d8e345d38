"""The accept test of one position as a gauge: the test the round's rule ran there (the draw
u against min(1, p/q) token-wise, u_i against h_i in a block round, p against the threshold
in a typical one), and alpha against 1 - alpha. Numbers from
core.metrics.position_bars.PositionBars. GUI thread only."""

from __future__ import annotations

import html
from dataclasses import dataclass

import pyqtgraph as pg

from specviz.core.metrics.position_bars import PositionBars
from specviz.gui import palette
from specviz.gui.plots.plot_kit import cache_axes
from specviz.gui.stream.figures import fmt, fmt_pair


@dataclass(frozen=True)
class AcceptTest:
    """The comparison a rule made at one judged position, its sign read from the numbers."""

    mark: float  # the value held against the line (u, or p for the typical rule)
    line: float  # min(1, p/q), the block's h_i, or the typical threshold
    passes: bool  # the numbers' own verdict: u < line (p > line for the typical rule)
    accept_above: bool  # the typical rule keeps p above its line; the others u below it
    label: str  # "0.952 ≥ h 0.760": the figures and the sign that holds between them


def accept_test(bars: PositionBars | None) -> AcceptTest | None:
    """The test the round's rule ran at this position (None where none ran)."""
    if bars is None or bars.accept_prob is None:
        return None
    if bars.block is not None:  # Sun et al.: u_i against h_i, the block's own chance
        _, h, u = bars.block
        shown = fmt_pair(u, h)
        return AcceptTest(u, h, u < h, False, f"u {shown[0]} {_lt(u < h)} h {shown[1]}")
    if bars.typical_threshold is not None and bars.drafted_event is not None:
        p, t = bars.drafted_event.p, bars.typical_threshold
        if p is None:
            return None
        shown = fmt_pair(p, t)
        sign = ">" if p > t else "≤"
        return AcceptTest(p, t, p > t, True, f"p {shown[0]} {sign} {shown[1]}")
    if bars.test is not None:  # another rule's recorded test (a round extra's position_test)
        t = bars.test
        shown = fmt_pair(t.mark, t.line)
        sign = (">" if t.passes else "≤") if t.above else _lt(t.passes)
        line = f"{t.line_name} {shown[1]}" if t.line_name else shown[1]
        return AcceptTest(
            t.mark, t.line, t.passes, t.above, f"{t.mark_name} {shown[0]} {sign} {line}"
        )
    if bars.u is None:
        return None
    u, a = bars.u, bars.accept_prob
    shown = fmt_pair(u, a)
    return AcceptTest(u, a, u < a, False, f"u {shown[0]} {_lt(u < a)} {shown[1]}")


def _lt(below: bool) -> str:
    return "<" if below else "≥"


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
            "Left: the test the round's rule ran here. Token-wise: the draw u against "
            "min(1, p/q), accepted below the line. Block: u_i against h_i, the chance of "
            "keeping the block up to here (the block keeps up to the last u_i < h_i). "
            "Typical (lossy): p against its threshold, accepted above the line.\n"
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
        # three ticks: the panel is short, and pyqtgraph's default five overlap there
        item.getAxis("left").setTicks([[(0, "0"), (0.5, "0.5"), (1, "1")], []])
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
        test = accept_test(bars)
        if test is None:
            self.accept_region.setOpts(y0=[0.0], height=[0.0])
            self.reject_region.setOpts(y0=[0.0], height=[0.0])
            self.threshold.setData([], [])
            note = {"bonus": "bonus token:\nnothing drafted", "discarded": "never judged"}
            self.accept_text.setText("" if bars is None else note.get(bars.kind, ""))
            self.accept_text.setPos(0, 0.45)
            self.u_mark.setData([], [])
        else:
            line = test.line
            low, high = (self.reject_region, self.accept_region)
            if not test.accept_above:
                low, high = high, low
            low.setOpts(y0=[0.0], height=[line])
            high.setOpts(y0=[line], height=[1.0 - line])
            self.threshold.setData([-0.45, 0.45], [line, line])
            self.accept_text.setText("")
            self.u_mark.setData([0.0], [test.mark])
        alpha = None if bars is None else bars.alpha
        rejection = None if bars is None else bars.rejection_mass
        # the test's figures go in the title, where the marks never cover them
        left = axis_label(bars)
        # the test with its figures (the title is rich text: "<" escaped)
        title = "accept test" if test is None else html.escape(test.label)
        self.getPlotItem().setTitle(title, size="9pt")
        split = "\u03b1 | 1\u2212\u03b1" if alpha is None else f"{fmt(alpha)} | {fmt(rejection)}"
        self.getPlotItem().getAxis("bottom").setTicks([[(0, left), (1, split)]])
        self.alpha_item.setOpts(height=[alpha or 0.0])
        self.rejection_item.setOpts(y0=[alpha or 0.0], height=[rejection or 0.0])
        if alpha is None:
            self.alpha_text.setText("")
        else:
            self.alpha_text.setText(f"\u03b1\n{fmt(alpha)}")
            self.alpha_text.setPos(1, alpha / 2)


_AXIS_TEST = {"token": "u vs min(1,p/q)", "block": "u vs h_i", "typical": "p vs threshold",
              "tried": "u vs min(1,p_tried/q)", "topk": "u vs p_tried"}  # fmt: skip


def axis_label(bars: PositionBars | None) -> str:
    """The gauge's test in words: a tree's token tested against p_tried (a later sibling),
    or p_tried alone (the topk rule: q_tried = 1), says so (schema 1.9)."""
    rule = _rule(bars)
    if rule == "token" and bars is not None and bars.test is not None:
        return bars.test.axis  # another rule's, from its extra
    return _AXIS_TEST[rule]


def _rule(bars: PositionBars | None) -> str:
    if bars is not None and bars.block is not None:
        return "block"
    if bars is not None and bars.typical:
        return "typical"
    drafted = None if bars is None else bars.drafted_event
    if drafted is not None and drafted.q_tried is not None:
        return "topk"
    tried = drafted is not None and drafted.p_tried not in (None, drafted.p)
    return "tried" if tried else "token"
