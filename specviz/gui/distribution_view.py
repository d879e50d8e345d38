"""The distribution panel: for the selected position, p and q of the top-N tokens, split
into min(p, q) (accepted mass) and max(0, p - q) (the residual's mass), the draw u against
min(1, p/q), alpha and 1 - alpha, and the residual a resampled token was drawn from.

All numbers come from `specviz.core.bars.position_bars`; plot items are created once and
updated with setOpts / setData. GUI thread only.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (
    QApplication,
    QHBoxLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ..core.bars import PositionBars, position_bars
from ..core.session import Session
from ..core.trace import Round, TraceError
from . import palette
from .plots import cache_axes, fit_tick_labels, fix_axis_width
from .token_view import fmt

THICK = 0.38  # bar thickness (rows are 1 apart)
LABEL_CHARS = 16
# The main plot's token axis fits a tagged label such as "refused ▸ " and ten characters
# of the token; a longer label is cut at the end.
MAIN_LABEL_ROOM = "never judged \u25b8 " + "0" * 10


def token_label(text: str) -> str:
    """A token as an axis label: whitespace made visible, long ones shortened."""
    if text.startswith("(") and text.endswith(")"):
        return text  # "(everything else)"
    shown = text.replace(" ", "\u2423").replace("\n", "\u21b5").replace("\t", "\u21e5")
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in shown) or "\u2205"
    return shown if len(shown) <= LABEL_CHARS else shown[: LABEL_CHARS - 1] + "\u2026"


def _values(values: tuple[float | None, ...]) -> np.ndarray:
    return np.array([0.0 if v is None else v for v in values], dtype=float)


def _brush(colour: str, alpha: int = 255):
    c = pg.mkColor(colour)
    c.setAlpha(alpha)
    return pg.mkBrush(c)


def _plot(title: str) -> pg.PlotWidget:
    widget = pg.PlotWidget()
    item = widget.getPlotItem()
    cache_axes(item)
    item.setTitle(title, size="9pt")
    for side in ("left", "bottom"):
        item.getAxis(side).enableAutoSIPrefix(False)  # probabilities, not milli-units
    item.setMenuEnabled(False)
    item.hideButtons()
    widget.setMouseEnabled(x=False, y=False)
    return widget


class DistributionView(QWidget):
    """Shows one position of one round; `show_position(rnd, position)` redraws it."""

    n_changed = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.bars: PositionBars | None = None
        self._round: Round | None = None
        self._position = 0
        self._session: Session | None = None
        self.summary = QLabel("Click a token to see its position's distributions.")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.summary.setMinimumHeight(52)
        self.summary.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.n_spin = QSpinBox()
        self.n_spin.setRange(1, 1000)
        self.n_spin.setValue(12)
        self.n_spin.setPrefix("top ")
        self.n_spin.setSuffix(" tokens")
        self.n_spin.setToolTip("How many tokens get their own bars; the rest is one bar")
        self.n_spin.valueChanged.connect(self._on_n)

        self.main = _plot("p (target) and q (draft) at this position")
        self.residual_plot = _plot("residual norm(max(0, p\u2212q))")
        self.gauge = _plot("accept test: u below the line = accepted")
        self._build_main()
        self._build_residual()
        self._build_gauge()

        self.legend = QLabel(palette.bar_legend_html())
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setWordWrap(True)
        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        top.addWidget(self.n_spin, 0, Qt.AlignmentFlag.AlignTop)
        side = QVBoxLayout()
        side.addWidget(self.gauge, 1)
        side.addWidget(self.residual_plot, 1)
        plots = QHBoxLayout()
        plots.addWidget(self.main, 3)
        plots.addLayout(side, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.legend)
        layout.addLayout(plots, 1)
        self.show_bars(None)

    # ------------------------------------------------------------------------------ items

    def _build_main(self) -> None:
        item = self.main.getPlotItem()
        fix_axis_width(item.getAxis("left"), MAIN_LABEL_ROOM)  # token labels and their tags
        item.invertY(True)
        item.setLabel("bottom", "probability")
        item.showGrid(x=True, alpha=0.25)
        no_pen = pg.mkPen(None)
        self.band = pg.BarGraphItem(x0=[], y=[], width=[], height=1.0, brushes=[], pen=no_pen)
        self.band.setZValue(-10)
        self.q_item = pg.BarGraphItem(
            x0=[], y=[], width=[], height=THICK, brush=_brush(palette.Q, 150), pen=no_pen
        )
        self.min_item = pg.BarGraphItem(
            x0=[], y=[], width=[], height=THICK, brush=_brush(palette.MIN_PQ, 200), pen=no_pen
        )
        self.excess_item = pg.BarGraphItem(
            x0=[], y=[], width=[], height=THICK, brush=_brush(palette.EXCESS, 200), pen=no_pen
        )
        self.p_item = pg.BarGraphItem(
            x0=[], y=[], width=[], height=THICK, brushes=[], pen=pg.mkPen(palette.P, width=2)
        )
        for bar in (self.band, self.q_item, self.min_item, self.excess_item, self.p_item):
            item.addItem(bar)
        self.rest_text = pg.TextItem(anchor=(1, 0.5), color=palette.U_MARK)
        item.addItem(self.rest_text)

    def _build_residual(self) -> None:
        item = self.residual_plot.getPlotItem()
        item.invertY(True)
        item.setLabel("bottom", "probability")
        self.residual_item = pg.BarGraphItem(
            x0=[], y=[], width=[], height=2 * THICK, brushes=[], pen=pg.mkPen(None)
        )
        item.addItem(self.residual_item)
        self.residual_note = pg.TextItem(anchor=(0.5, 0.5), color=palette.BOUNDARY)
        item.addItem(self.residual_note)

    def _build_gauge(self) -> None:
        item = self.gauge.getPlotItem()
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

    # ------------------------------------------------------------------------------ model

    def show_position(
        self, rnd: Round | None, position: int = 0, session: Session | None = None
    ) -> None:
        """Show a position of a round (None: nothing selected). session: the session the
        round belongs to, which holds the top-N lists of a trace read from a file."""
        self._round, self._position, self._session = rnd, position, session
        if rnd is None:
            self.show_bars(None)
            return
        try:
            n = self.n_spin.value()
            full = rnd if session is None else session.details(rnd.index)
            bars = position_bars(full, position, n, min(n, self._residual_rows()))
        except TraceError as e:  # a trace's top-N lists are parsed when first shown
            self.show_bars(None)
            reason = html.escape(str(e), quote=False)
            self.summary.setText(
                f"<b>This position's stored distribution is unreadable:</b> {reason}"
            )
            return
        self.show_bars(bars)

    def _residual_rows(self) -> int:
        """How many residual tokens fit the residual plot with legible labels (besides the
        resampled token and the rest)."""
        height = self.residual_plot.getPlotItem().getViewBox().height()
        line = QFontMetrics(QApplication.font()).height()
        return max(2, int(height / (1.2 * line)) - 2) if height > 0 else 1000

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self._round is not None:  # as many residual rows as now fit
            self.show_position(self._round, self._position, self._session)

    def _on_n(self, n: int) -> None:
        if self._round is not None:
            self.show_position(self._round, self._position, self._session)
        self.n_changed.emit(n)

    @property
    def selected(self) -> tuple[int, int] | None:
        return None if self._round is None else (self._round.index, self._position)

    def show_bars(self, bars: PositionBars | None) -> None:
        self.bars = bars
        self._draw_main(bars)
        self._draw_residual(bars)
        self._draw_gauge(bars)
        self.summary.setText(summary_html(bars))

    def _draw_main(self, bars: PositionBars | None) -> None:
        item = self.main.getPlotItem()
        if bars is None:
            for bar in (self.band, self.p_item):
                bar.setOpts(x0=[], y=[], width=[], brushes=[])
            for bar in (self.q_item, self.min_item, self.excess_item):
                bar.setOpts(x0=[], y=[], width=[])
            self.rest_text.setText("")
            item.getAxis("left").setTicks([[]])
            item.setXRange(0, 1, padding=0)
            item.setYRange(0, 1, padding=0)
            return
        n = bars.n_bars
        rows = np.arange(n, dtype=float)
        p, q = _values(bars.p), _values(bars.q)
        mins, excess = _values(bars.min_pq), _values(bars.excess)
        # fit the tokens; a larger "everything else" bar is clipped and labelled
        top = max(float(np.max(p[:-1], initial=0)), float(np.max(q[:-1], initial=0)), 0.02) * 1.15
        rest = max(p[-1], q[-1])
        self.rest_text.setText(f"{rest:.2f} \u25b8" if rest > top else "")
        self.rest_text.setPos(top, n - 1)
        # p is drawn as an outline around min + excess; filled where they are unknown
        p_fill = [_brush(palette.P, 90 if m is None else 0) for m, v in zip(bars.min_pq, bars.p)]
        self.p_item.setOpts(x0=np.zeros(n), y=rows + 0.2, width=p, brushes=p_fill)
        self.min_item.setOpts(x0=np.zeros(n), y=rows + 0.2, width=mins)
        self.excess_item.setOpts(x0=mins, y=rows + 0.2, width=excess)
        self.q_item.setOpts(x0=np.zeros(n), y=rows - 0.2, width=q)
        bands, brushes = [], []
        if bars.drafted_bar is not None:
            bands.append(bars.drafted_bar)
            brushes.append(_brush(palette.DRAFTED_BAND))
        if bars.emitted_bar is not None and bars.emitted_bar != bars.drafted_bar:
            bands.append(bars.emitted_bar)
            brushes.append(_brush(palette.EMITTED_BAND))
        self.band.setOpts(
            x0=np.zeros(len(bands)), y=np.array(bands, float), width=np.full(len(bands), top),
            brushes=brushes,
        )  # fmt: skip
        labels = [token_label(t) for t in bars.labels]
        for index, tag in ((bars.drafted_bar, _drafted_tag(bars)), (bars.emitted_bar, "")):
            if index is not None and tag:
                labels[index] = f"{tag} {labels[index]}"
        if bars.emitted_bar is not None and bars.emitted_bar != bars.drafted_bar:
            labels[bars.emitted_bar] = (
                f"{bars.emitted_event.status} \u25b8 {labels[bars.emitted_bar]}"
            )
        # The axis has a fixed width: a label wider than it would be hidden, so it is cut
        # at the end (the tag stays).
        axis = item.getAxis("left")
        axis.setTicks([list(zip(range(n), fit_tick_labels(axis, labels)))])
        item.setYRange(-0.6, n - 0.4, padding=0)
        item.setXRange(0, top, padding=0)

    def _draw_residual(self, bars: PositionBars | None) -> None:
        item = self.residual_plot.getPlotItem()
        if bars is None or not bars.residual:
            self.residual_item.setOpts(x0=[], y=[], width=[], brushes=[])
            item.getAxis("left").setTicks([[]])
            item.setXRange(0, 1, padding=0)
            item.setYRange(0, 1, padding=0)
            note = "" if bars is None else "no resampling at this position"
            self.residual_note.setText(note)
            self.residual_note.setPos(0.5, 0.5)
            return
        self.residual_note.setText("")
        n = len(bars.residual)
        values = np.array(bars.residual, dtype=float)
        brushes = [
            _brush(palette.fate("resampled").foreground)
            if i == bars.residual_bar
            else _brush(palette.REST if bars.residual_ids[i] is None else palette.EXCESS, 110)
            for i in range(n)
        ]
        self.residual_item.setOpts(
            x0=np.zeros(n), y=np.arange(n, dtype=float), width=values, brushes=brushes
        )
        labels = [token_label(t) for t in bars.residual_labels]
        if bars.residual_bar is not None:
            labels[bars.residual_bar] = f"resampled \u25b8 {labels[bars.residual_bar]}"
        item.getAxis("left").setTicks([list(enumerate(labels))])
        item.setYRange(-0.6, n - 0.4, padding=0)
        item.setXRange(0, max(float(values.max()), 0.05) * 1.1, padding=0)

    def _draw_gauge(self, bars: PositionBars | None) -> None:
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
            test = f"u {u:.3f} {relation} {a:.3f}"
        split = (
            "\u03b1 | 1\u2212\u03b1" if alpha is None else f"\u03b1 {alpha:.2f} | {rejection:.2f}"
        )
        self.gauge.getPlotItem().getAxis("bottom").setTicks([[(0, test), (1, split)]])
        self.alpha_item.setOpts(height=[alpha or 0.0])
        self.rejection_item.setOpts(y0=[alpha or 0.0], height=[rejection or 0.0])
        if alpha is None:
            self.alpha_text.setText("")
        else:
            self.alpha_text.setText(f"\u03b1\n{alpha:.2f}")
            self.alpha_text.setPos(1, alpha / 2)


def _drafted_tag(bars: PositionBars) -> str:
    event = bars.drafted_event
    if event is None:
        return ""
    return {
        "accepted": "kept \u25b8",
        "rejected": "refused \u25b8",
        "discarded": "never judged \u25b8",
    }[event.status]


def summary_html(bars: PositionBars | None) -> str:
    """One paragraph that reads the position's verdict out loud, numbers from core."""
    if bars is None:
        return "Click a token in the stream to see the distributions at its position."
    drafted, emitted = bars.drafted_event, bars.emitted_event
    head = f"<b>Round {bars.round_index + 1}, position {bars.position + 1}</b>. "
    parts = []
    if drafted is not None:
        colour = palette.fate(drafted.status).foreground
        parts.append(
            f"The draft proposed <b style='color:{colour}'>{_quote(drafted.text)}</b> "
            f"with q = {fmt(drafted.q)}"
        )
        if bars.accepted is not None:
            relation = "&lt;" if bars.accepted else "&ge;"
            verdict = "accepted" if bars.accepted else "rejected"
            parts.append(
                f"the target gives it p = {fmt(drafted.p)}, so it is kept with probability "
                f"min(1, p/q) = {fmt(bars.accept_prob)}; the draw u = {fmt(bars.u)} "
                f"{relation} {fmt(bars.accept_prob)}: <b style='color:{colour}'>{verdict}</b>"
            )
        else:
            parts.append("it came after the first rejection, so it was never judged")
    if emitted is not None and emitted.status == "resampled":
        colour = palette.fate("resampled").foreground
        parts.append(
            f"in its place <b style='color:{colour}'>{_quote(emitted.text)}</b> was drawn "
            f"from norm(max(0, p \u2212 q)) (probability {fmt(emitted.residual)})"
        )
    if emitted is not None and emitted.status == "bonus":
        colour = palette.fate("bonus").foreground
        parts.append(
            f"all drafts were accepted, so the target's own p gave a bonus token "
            f"<b style='color:{colour}'>{_quote(emitted.text)}</b> (p = {fmt(emitted.p)})"
        )
    text = head + "; ".join(parts) + "."
    if bars.alpha is not None:
        text += (
            f"<br>\u03b1 = \u03a3 min(p, q) = <b>{fmt(bars.alpha)}</b>: the chance that a "
            f"token drafted here is accepted; 1 \u2212 \u03b1 = {fmt(bars.rejection_mass)} "
            "is the residual's mass."
        )
    return text


def _quote(text: str) -> str:
    shown = repr(text)
    return shown.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
