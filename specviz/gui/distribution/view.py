"""The distribution panel: for the selected position, p and q of the top-N tokens, split
into min(p, q) (accepted mass) and max(0, p - q) (the residual's mass), the draw u against
min(1, p/q), alpha and 1 - alpha, and the residual a resampled token was drawn from.

All numbers come from `core.metrics.position_bars.position_bars`; plot items are created once and
updated with setOpts / setData. GUI thread only.
"""

from __future__ import annotations

import functools
import html
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCursor, QFontMetrics
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from specviz.core.metrics.position_bars import PositionBars, position_bars
from specviz.core.trace.records import Round, TraceError
from specviz.core.trace.session import Session
from specviz.gui import palette
from specviz.gui.distribution.accept_gauge import AcceptGauge
from specviz.gui.distribution.summary_area import MIN_PLOT, SummaryArea
from specviz.gui.distribution.text import (
    drafted_tag,
    main_title,
    row_text,
    summary_html,
    token_label,
)
from specviz.gui.plots.plot_kit import (
    cache_axes,
    export_widget,
    fit_tick_labels,
    fix_axis_width,
    nice_ceiling,
)
from specviz.gui.stream.figures import fmt
from specviz.gui.tooltips import show_plain

THICK = 0.38  # bar thickness (rows are 1 apart)
# The main plot's token axis fits a tagged label such as "rejected ▸ " and ten characters
# of the token; a longer label is cut at the end.
MAIN_LABEL_ROOM = "never judged \u25b8 " + "0" * 10
RESIDUAL_LABEL_ROOM = "resampled \u25b8 " + "0" * 6
LOG_FLOOR = 1e-6  # the log scale's left edge: smaller probabilities start there


def _values(values: tuple[float | None, ...]) -> np.ndarray:
    return np.array([0.0 if v is None else v for v in values], dtype=float)


@functools.cache  # a few colours, one brush each (not one per bar per position)
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


def _set_title(item: pg.PlotItem, title: str) -> None:
    """A new title relays out the plot (about 1 ms): only when it changes."""
    if item.titleLabel.text != title:
        item.setTitle(title, size="9pt")


def rows_that_fit(widget: QWidget) -> int:
    """How many bar rows a plot widget shows with legible labels: the count follows the
    widget's height (not its view box's, which moves with the tick labels: clicking the
    same position twice must draw the same rows)."""
    if not widget.isVisible():
        return 1000  # not laid out yet: everything
    line = QFontMetrics(QApplication.font()).height()
    room = widget.height() - 3.5 * line  # title and the probability axis
    return max(3, int(room / (1.15 * line)))


def shown_rows(bars: PositionBars) -> list[int]:
    """The bars worth a row: every token with mass under p or q (at temperature 0 most of a
    top-N list is zero), the drafted and the emitted token, and everything else."""
    keep = {bars.drafted_bar, bars.emitted_bar, bars.n_bars - 1}
    return [
        i
        for i in range(bars.n_bars)
        if i in keep or (bars.p[i] or 0.0) > 0 or (bars.q[i] or 0.0) > 0
    ]


class DistributionView(QWidget):
    """Shows one position of one round; `show_position(rnd, position)` redraws it."""

    n_changed = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.bars: PositionBars | None = None
        self._round: Round | None = None
        self._position = 0
        self._session: Session | None = None
        self.drafter: str | None = None  # the session's drafter kind (its header's)
        # its height only grows (gui/stream/rich_line.py), up to a few lines, the rest scrolled
        self.summary_area = SummaryArea("Click a token to see its position's distributions.")
        self.summary = self.summary_area.summary
        self.n_spin = QSpinBox()
        self.n_spin.setRange(1, 1000)
        self.n_spin.setValue(12)
        self.n_spin.setPrefix("top ")
        self.n_spin.setSuffix(" tokens")
        self.n_spin.setToolTip("How many tokens get their own bars; the rest is one bar")
        self.n_spin.valueChanged.connect(self._on_n)

        self.log_check = QCheckBox("log scale")
        self.log_check.setToolTip(
            "Probabilities on a log axis: a draft's own q of 7.6e-05 next to 0.03 is visible"
        )
        self.log_check.toggled.connect(lambda _: self._redraw())
        self.main = _plot(main_title(None))
        self.residual_plot = _plot("residual")
        self.residual_plot.setToolTip(
            "norm(max(0, p \u2212 q)): what a token is drawn from after a rejection"
        )
        self.gauge = AcceptGauge()
        self.rows: list[int] = []  # the bars drawn in the main plot, top to bottom
        self.token_labels: list[str] = []  # their labels on the token axis, as drawn
        self._build_main()
        self._build_residual()
        for plot in (self.main, self.residual_plot):
            plot.scene().sigMouseMoved.connect(lambda pos, plot=plot: self._hover(plot, pos))

        self.legend = QLabel(palette.bar_legend_html())
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setWordWrap(True)
        top = QHBoxLayout()
        top.addWidget(self.summary_area, 1)
        options = QVBoxLayout()
        options.addWidget(self.n_spin)
        options.addWidget(self.log_check)
        options.addStretch(1)
        top.addLayout(options)
        for plot in (self.main, self.gauge, self.residual_plot):
            plot.setMinimumHeight(MIN_PLOT)
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
        # Grid lines at the major and minor ticks only: this axis (its grid spans the plot)
        # is drawn again at almost every position; a third level made it 1.5x as costly.
        item.getAxis("bottom").setStyle(maxTickLevel=1, maxTextLevel=1)
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
        fix_axis_width(item.getAxis("left"), RESIDUAL_LABEL_ROOM)
        item.invertY(True)
        item.setLabel("bottom", "probability")
        self.residual_item = pg.BarGraphItem(
            x0=[], y=[], width=[], height=2 * THICK, brushes=[], pen=pg.mkPen(None)
        )
        item.addItem(self.residual_item)

    # ------------------------------------------------------------------------------ model

    def show_position(
        self, rnd: Round | None, position: int = 0, session: Session | None = None
    ) -> None:
        """Show a position of a round (None: nothing selected). session: the session the
        round belongs to, which holds the top-N lists of a trace read from a file."""
        self._round, self._position, self._session = rnd, position, session
        self.drafter = (session.header.drafter or {}).get("kind") if session else None
        if rnd is None:
            self.show_bars(None)
            return
        try:
            rnd = rnd if session is None else session.details(rnd.index)
            limits = self.row_limits()
            bars = position_bars(rnd, position, *limits)
            # The summary's height sets the plots': when a longer summary grows it, lay
            # the panel out now, so that the rows fit the plots' new heights.
            self.summary.setText(summary_html(bars, self.drafter))
            self.layout().activate()  # nothing to do unless the summary grew
            if self.row_limits() != limits:
                bars = position_bars(rnd, position, *self.row_limits())
        except TraceError as e:  # a trace's top-N lists are parsed when first shown
            self.show_bars(None)
            reason = html.escape(str(e), quote=False)
            self.summary.setText(
                f"<b>This position's stored distribution is unreadable:</b> {reason}"
            )
            return
        self.show_bars(bars)

    def row_limits(self) -> tuple[int, int]:
        """(tokens, residual tokens) that get their own bars: the top-N asked for, as far as
        the plots' heights allow (the rest is one bar; the residual also keeps its token)."""
        n = self.n_spin.value()
        return (
            min(n, rows_that_fit(self.main) - 1),
            min(n, rows_that_fit(self.residual_plot) - 2),
        )

    def _redraw(self) -> None:
        if self._round is not None:
            self.show_position(self._round, self._position, self._session)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._redraw()  # as many rows as now fit

    def _on_n(self, n: int) -> None:
        self._redraw()
        self.n_changed.emit(n)

    @property
    def selected(self) -> tuple[int, int] | None:
        return None if self._round is None else (self._round.index, self._position)

    def show_bars(self, bars: PositionBars | None) -> None:
        self.bars = bars
        self._draw_main(bars)
        self._draw_residual(bars)
        self.gauge.draw(bars)
        self.summary.setText(summary_html(bars, self.drafter))

    # ------------------------------------------------------------------------------ hover

    def describe_row(self, row: int) -> str:
        """The hover text of the main plot's row `row` (0 = top)."""
        if self.bars is None or not 0 <= row < len(self.rows):
            return ""
        return row_text(self.bars, self.rows[row])

    def describe_residual_row(self, row: int) -> str:
        bars = self.bars
        if bars is None or not 0 <= row < len(bars.residual):
            return ""
        name = bars.residual_labels[row]
        return f"{name!r}: {fmt(bars.residual[row])} under norm(max(0, p \u2212 q))"

    def _hover(self, plot: pg.PlotWidget, pos) -> None:
        view = plot.getPlotItem().getViewBox()
        if not view.sceneBoundingRect().contains(pos):
            return
        row = int(round(view.mapSceneToView(pos).y()))
        main = plot is self.main
        text = self.describe_row(row) if main else self.describe_residual_row(row)
        show_plain(QCursor.pos(), text, plot)  # a token's text: never rich text

    # ------------------------------------------------------------------------------ drawing

    def _draw_main(self, bars: PositionBars | None) -> None:
        item = self.main.getPlotItem()
        if (title := main_title(bars)) != item.titleLabel.text:  # unjudged: p never judged
            item.setTitle(title, size="9pt")
        log = self.log_check.isChecked()
        if item.getAxis("bottom").logMode != log:  # a new label relays out the plot: on change
            item.getAxis("bottom").setLogMode(log)
            item.setLabel("bottom", "probability (log)" if log else "probability")
        if bars is None:
            self.rows, self.token_labels = [], []
            for bar in (self.band, self.p_item):
                bar.setOpts(x0=[], y=[], width=[], brushes=[])
            for bar in (self.q_item, self.min_item, self.excess_item):
                bar.setOpts(x0=[], y=[], width=[])
            self.rest_text.setText("")
            item.getAxis("left").setTicks([[]])
            item.setXRange(0, 1, padding=0)
            item.setYRange(0, 1, padding=0)
            return
        self.rows = shown_rows(bars)
        pick = np.array(self.rows)
        n = len(self.rows)
        y = np.arange(n, dtype=float)
        p, q = _values(bars.p)[pick], _values(bars.q)[pick]
        mins, excess = _values(bars.min_pq)[pick], _values(bars.excess)[pick]
        # fit the tokens; a larger "everything else" bar is clipped and labelled
        top = max(float(np.max(p[:-1], initial=0)), float(np.max(q[:-1], initial=0)), 0.02) * 1.15
        # a round number: positions with similar bars share the axis, which is then not
        # drawn again (its grid spans the plot: the largest item of a Step's repaint)
        top = nice_ceiling(top)
        rest = max(p[-1], q[-1])
        if log:  # bars from the floor to log10(value); p - q between log min and log p
            top = 0.05  # log10(1) = 0: the axis ends at 1
            edge = np.log10(LOG_FLOOR)

            def at(v):
                return np.log10(np.maximum(v, LOG_FLOOR))

            x0, p_w, q_w, min_w = edge, at(p) - edge, at(q) - edge, at(mins) - edge
            ex0, ex_w = at(mins), np.where(excess > 0, at(p) - at(mins), 0.0)
            masses = np.concatenate([p, q])
            smallest = float(at(masses[masses > 0]).min()) if (masses > 0).any() else edge
            left = max(edge, smallest - 0.5)
        else:
            x0, p_w, q_w, min_w, ex0, ex_w, left = 0.0, p, q, mins, mins, excess, 0.0
        rest_label = f"{rest:.2f} \u25b8" if rest > top and not log else ""
        if rest_label != self.rest_text.toPlainText():
            self.rest_text.setText(rest_label)
        self.rest_text.setPos(top, n - 1)
        # a TextItem moves itself in its paint, which asks for a second paint: only when shown
        self.rest_text.setVisible(bool(self.rest_text.toPlainText()))
        zeros = np.full(n, x0)
        # p is drawn as an outline around min + excess; filled where they are unknown
        p_fill = [_brush(palette.P, 90 if bars.min_pq[i] is None else 0) for i in self.rows]
        dash = Qt.PenStyle.DashLine if bars.p_never_judged else Qt.PenStyle.SolidLine
        pen = pg.mkPen(palette.P, width=2, style=dash)  # unjudged: a dashed p outline
        self.p_item.setOpts(x0=zeros, y=y + 0.2, width=p_w, brushes=p_fill, pen=pen)
        self.min_item.setOpts(x0=zeros, y=y + 0.2, width=min_w)
        self.excess_item.setOpts(x0=ex0, y=y + 0.2, width=ex_w)
        self.q_item.setOpts(x0=zeros, y=y - 0.2, width=q_w)
        drafted = self.rows.index(bars.drafted_bar) if bars.drafted_bar is not None else None
        emitted = self.rows.index(bars.emitted_bar) if bars.emitted_bar is not None else None
        bands, brushes = [], []
        if drafted is not None:
            bands.append(drafted)
            brushes.append(_brush(palette.DRAFTED_BAND))
        if emitted is not None and emitted != drafted:
            bands.append(emitted)
            brushes.append(_brush(palette.EMITTED_BAND))
        self.band.setOpts(
            x0=np.full(len(bands), min(x0, left)), y=np.array(bands, float),
            width=np.full(len(bands), top - min(x0, left)), brushes=brushes,
        )  # fmt: skip
        labels = [token_label(bars.labels[i]) for i in self.rows]
        tag = drafted_tag(bars)
        if drafted is not None and tag:
            labels[drafted] = f"{tag} {labels[drafted]}"
        if emitted is not None and emitted != drafted:
            labels[emitted] = f"{bars.emitted_event.status} \u25b8 {labels[emitted]}"
        # The axis has a fixed width: a label wider than it would be hidden, so it is cut
        # at the end (the tag stays).
        axis = item.getAxis("left")
        self.token_labels = fit_tick_labels(axis, labels)
        axis.setTicks([list(enumerate(self.token_labels))])
        item.setYRange(-0.6, n - 0.4, padding=0)
        item.setXRange(left, top, padding=0)
        # Move the bars to the new range now: pyqtgraph would do it in the paint, and the
        # moved items would then ask for a second paint of the whole view.
        item.getViewBox().updateMatrix()

    def _draw_residual(self, bars: PositionBars | None) -> None:
        item = self.residual_plot.getPlotItem()
        if bars is None or not bars.residual:
            self.residual_item.setOpts(x0=[], y=[], width=[], brushes=[])
            item.getAxis("left").setTicks([[]])
            item.getAxis("bottom").setTicks([[(0.0, "0"), (0.5, "0.5"), (1.0, "1")]])
            item.setXRange(0, 1, padding=0)
            item.setYRange(0, 1, padding=0)
            _set_title(item, "residual" if bars is None else "residual: none")
            return
        _set_title(item, "residual")
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
        axis = item.getAxis("left")
        axis.setTicks([list(enumerate(fit_tick_labels(axis, labels)))])
        item.setYRange(-0.6, n - 0.4, padding=0)
        right = nice_ceiling(max(float(values.max()), 0.05) * 1.1)  # as the main plot's
        item.setXRange(0, right, padding=0)
        item.getViewBox().updateMatrix()  # now, not in the paint (as in _draw_main)
        # three ticks: the panel is narrow, and five labels would run into each other
        ticks = [0.0, float(f"{right / 2:.1g}"), float(f"{right * 0.95:.1g}")]
        item.getAxis("bottom").setTicks([[(t, f"{t:g}") for t in ticks if t <= right]])

    # ------------------------------------------------------------------------------ export

    def export(self, name: str, path: str | Path) -> None:
        """Write the panel (summary, legend, bars, gauge, residual) to PNG or SVG."""
        export_widget(self, path, "specviz: the distributions at one position")
