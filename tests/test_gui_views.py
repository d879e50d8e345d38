"""The views, built from hand-made rounds: colours, texts, bar heights, plot data."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PySide6.QtGui import QColor, QFontMetrics, QImage
from PySide6.QtWidgets import QApplication

from specviz.core.metrics.position_bars import position_bars
from specviz.core.metrics.running import RunningStats
from specviz.gui import palette
from specviz.gui.distribution.view import DistributionView, summary_html
from specviz.gui.palette import fate_legend_html as legend_html
from specviz.gui.plots.round_plots import PLOTS, Plots
from specviz.gui.stream.panel import StreamPanel
from specviz.gui.stream.token_view import (
    BLOCK_CHARS,
    ROUND_TOKEN,
    TokenView,
    display_text,
    status_of,
)
from tests.fixtures import sample_header, sample_rounds


@pytest.fixture
def token_view(qtbot):
    view = TokenView()
    qtbot.addWidget(view)
    view.clear_session(sample_header())
    for rnd in sample_rounds():
        view.append_rounds([rnd])
    return view


def test_token_view_texts_colours_and_strike(token_view):
    view = token_view
    text = view.toPlainText()
    assert text.startswith("Once upon\u2502 the cat")
    r0 = view.round(0)
    for i, event in enumerate(r0.tokens):
        assert view.span_text(0, i) == display_text(event.text)
        f = view.char_format(0, i)
        fate = palette.fate(event.status)
        assert f.foreground().color() == QColor(fate.foreground)
        assert f.background().color() == QColor(fate.background)
        assert f.fontStrikeOut() == (event.status in ("rejected", "discarded"))
        assert status_of(f) == event.status
    assert view.span_text(0, 4) == "\u21b5\n"  # a line break is visible and kept
    assert view.span_text(1, ROUND_TOKEN) == "\u2502"  # round boundaries are marked
    assert status_of(view.char_format(1, 1)) == "bonus"


@pytest.mark.parametrize("batch", [1, 7, 400])
def test_token_view_spans_of_any_text_in_one_edit(qtbot, batch):
    """Runs of one fate go in with one insertText and spans are counted, not asked of the
    cursor: texts outside the BMP, line breaks, empty and blank tokens, long paragraphs."""
    texts = ["😀", "日本", "a\nb", "", "   ", "\r\n", "\u2029x", "é😀é", " the", "\n\n"]
    texts += [" a long token without a line break" * 3] * 30  # paragraphs end at rounds
    r0, r1 = sample_rounds()
    rounds = []
    for i in range(400):
        source = r0 if i % 2 == 0 else r1
        tokens = tuple(
            dataclasses.replace(t, text=texts[(i + j) % len(texts)] * (1 + i % 3))
            for j, t in enumerate(source.tokens)
        )
        rounds.append(dataclasses.replace(source, index=i, tokens=tokens))
    view = TokenView()
    qtbot.addWidget(view)
    view.clear_session(sample_header())
    for start in range(0, len(rounds), batch):
        view.append_rounds(rounds[start : start + batch])
    assert view.document().blockCount() > 10  # paragraphs were started along the way
    for rnd in rounds:
        for i, event in enumerate(rnd.tokens):
            shown = display_text(event.text).replace("\r", "\n").replace("\u2029", "\n")
            assert view.span_text(rnd.index, i) == shown  # Qt breaks lines at \r and U+2029
            assert view.key_at(view.span(rnd.index, i)[0]) == (rnd.index, i)
            assert status_of(view.char_format(rnd.index, i)) == event.status
        assert view.span_text(rnd.index, ROUND_TOKEN) == "\u2502"


def test_token_view_hover_and_click(token_view, qtbot):
    view = token_view
    tip = view.tooltip_at((0, 1))
    assert "rejected" in tip and "p (target) = 0.100" in tip and "q (draft) = 0.600" in tip
    assert "accept prob min(1, p/q) = 0.167" in tip and "u = 0.800" in tip
    assert "never judged" in view.tooltip_at((0, 2))
    start, end = view.span(0, 1)
    assert view.key_at(start) == (0, 1) and view.key_at(end - 1) == (0, 1)
    with qtbot.waitSignal(view.position_selected) as blocker:
        view.click(0, 4)  # the resampled token sits at the rejected draft's position
    assert blocker.args == [0, 1]
    assert view.selected == (0, 1)
    assert len(view.extraSelections()) == 2  # both tokens of the position are highlighted


def test_selection_at_the_end_does_not_grow(qtbot):
    view = TokenView()
    qtbot.addWidget(view)
    view.clear_session(sample_header())
    r0, r1 = sample_rounds()
    view.append_rounds([r0])
    view.select(0, 1)  # its resampled token is the last text of the document
    view.append_rounds([r1])
    spans = sorted(
        (sel.cursor.selectionStart(), sel.cursor.selectionEnd()) for sel in view.extraSelections()
    )
    assert spans == sorted([view.span(0, 1), view.span(0, 4)])


def test_a_long_session_is_laid_out_in_short_paragraphs(qtbot):
    """Qt lays out a whole paragraph on each edit: a round appended to a long session must
    touch a short one, so that drawing does not grow with the session (its cost is measured
    in benchmarks/gui_redraw.py)."""
    view = TokenView()
    qtbot.addWidget(view)
    view.clear_session(sample_header())
    rounds = sample_rounds()
    longest_round = max(sum(len(t.text) + 1 for t in r.tokens) + 1 for r in rounds)
    for i in range(600):
        view.append_rounds([dataclasses.replace(rounds[i % 2], index=i)])
    assert view.round_count == 600
    assert view.key_at(view.span(599, 0)[0]) == (599, 0)
    block, lengths = view.document().begin(), []
    while block.isValid():
        lengths.append(block.length())
        block = block.next()
    assert len(lengths) > 3 and max(lengths) <= BLOCK_CHARS + longest_round + 1


def test_stream_panel_slider_and_legend(qtbot):
    panel = StreamPanel()
    qtbot.addWidget(panel)
    panel.clear(sample_header())
    for rnd in sample_rounds():
        panel.append_rounds([rnd])
    assert panel.slider.maximum() == 1 and panel.slider.isEnabled()
    with qtbot.waitSignal(panel.round_chosen) as blocker:
        panel.slider.setValue(1)
    assert blocker.args == [1] and panel.slider.value() == panel.slider.maximum()
    panel.show_round(0)
    assert "Round 1 / 2" in panel.round_label.text() and "accepted 1" in panel.round_label.text()
    legend = legend_html()
    for fate in palette.FATES.values():
        assert fate.foreground in legend and fate.label in legend


def test_distribution_view_rejected_position(qtbot):
    view = DistributionView()
    qtbot.addWidget(view)
    view.n_spin.setValue(20)
    rnd = sample_rounds()[0]
    view.show_position(rnd, 1)
    bars = position_bars(rnd, 1)
    assert view.bars == bars
    np.testing.assert_allclose(view.q_item.opts["width"], bars.q)
    np.testing.assert_allclose(view.p_item.opts["width"], bars.p)
    np.testing.assert_allclose(view.min_item.opts["width"], bars.min_pq)
    np.testing.assert_allclose(view.excess_item.opts["width"], bars.excess)
    np.testing.assert_allclose(view.excess_item.opts["x0"], bars.min_pq)  # stacked: p = min+excess
    assert list(view.band.opts["y"]) == [0, 2]  # drafted and emitted rows highlighted
    ticks = dict(enumerate(view.token_labels))
    assert ticks[0].startswith("rejected \u25b8") and ticks[2].startswith("resampled \u25b8")
    assert ticks[3] == "(everything else)"
    # u against min(1, p/q): the accepted region ends at the line, u sits above it
    assert view.gauge.accept_region.opts["height"] == [pytest.approx(1 / 6)]
    assert list(view.gauge.u_mark.getData()[1]) == [0.8]
    assert view.gauge.alpha_item.opts["height"] == [0.5]
    assert view.gauge.rejection_item.opts["height"] == [pytest.approx(0.5)]
    np.testing.assert_allclose(view.residual_item.opts["width"], bars.residual)
    assert "rejected" in view.summary.text() and "0.167" in view.summary.text()
    assert "1 \u2212 \u03b1 = 0.500" in view.summary.text()
    view.n_spin.setValue(1)  # top 1: the drafted, the emitted and everything else
    assert len(view.q_item.opts["width"]) == 3


def test_long_token_labels_are_cut_not_hidden(qtbot):
    """The token axis has a fixed width; pyqtgraph hides a label wider than its axis."""
    view = DistributionView()
    qtbot.addWidget(view)
    r0 = sample_rounds()[0]
    long = "<|a very long token that will not fit|>"
    tokens = list(r0.tokens)
    for i in (1, 4):  # the rejected draft and its resample: labels are stored top-N texts
        tokens[i] = dataclasses.replace(tokens[i], top_text=(long,) * len(tokens[i].top_text))
    view.show_position(dataclasses.replace(r0, tokens=tuple(tokens)), 1)
    axis = view.main.getPlotItem().getAxis("left")
    label = view.token_labels[0]
    assert label.startswith("rejected \u25b8 <|a") and label.endswith("\u2026")
    metrics = QFontMetrics(axis.style["tickFont"] or QApplication.font())
    room = axis.fixedWidth - axis.style["tickTextOffset"][0] - axis.style["tickLength"]
    assert all(metrics.horizontalAdvance(t) <= room for t in view.token_labels)


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_residual_rows_fit_the_panel(qtbot):
    view = DistributionView()
    qtbot.addWidget(view)
    view.n_spin.setValue(20)
    view.resize(900, 1200)
    view.show()
    rnd = sample_rounds()[0]
    view.show_position(rnd, 1)
    assert len(view.bars.residual) == 4  # room for all three stored entries and the rest
    view.resize(900, 330)  # a resize redraws with as many rows as fit
    qtbot.waitUntil(lambda: len(view.bars.residual) < 4)
    assert len(view.bars.residual) - 2 <= view.row_limits()[1]
    assert sum(view.bars.residual) == pytest.approx(1.0)


def test_distribution_view_other_positions(qtbot):
    view = DistributionView()
    qtbot.addWidget(view)
    r0, r1 = sample_rounds()
    view.show_position(r0, 2)  # discarded: q only
    assert view.bars.kind == "discarded"
    assert not np.any(view.p_item.opts["width"]) and not np.any(view.min_item.opts["width"])
    assert view.gauge.u_mark.getData()[0].size == 0
    assert "never judged" in view.summary.text()
    view.show_position(r1, 1)  # bonus: p only
    assert "bonus token" in view.summary.text()
    assert not np.any(view.q_item.opts["width"]) and np.any(view.p_item.opts["width"])
    assert view.residual_plot.getPlotItem().titleLabel.text == "residual: none"
    view.show_position(None)
    assert view.bars is None and len(view.q_item.opts["width"]) == 0
    assert "Click a token" in summary_html(None)


def test_plots_follow_running_stats(qtbot, tmp_path):
    plots = Plots()
    qtbot.addWidget(plots)
    stats = RunningStats.for_header(sample_header())
    figures = [stats.add(r) for r in sample_rounds()]
    for f in figures:
        plots.add(f, stats)
    x, y = plots.series(plots.acceptance_running)
    assert list(x) == [1, 2] and list(y) == [f.acceptance_running for f in figures]
    _, measured = plots.series(plots.speedup_measured)
    assert np.isnan(measured).all()  # without the cost model's figures no speedup is plotted
    assert list(plots.length_bars.opts["height"]) == stats.accepted_lengths
    # the histogram counts rounds: whole-number ticks (issue 37: 0.2, 0.4, ... of a round)
    ticks = plots.plots["accepted_length"].getAxis("left")._tickLevels[0]
    assert ticks and all(float(v).is_integer() and label == str(int(v)) for v, label in ticks)
    assert list(plots.position_bars.opts["height"]) == [
        v or 0.0 for v in stats.acceptance_by_position
    ]
    plots.mark_round(1)
    assert plots.markers[0].isVisible() and plots.markers[0].value() == 2  # counted from 1
    for name in PLOTS:
        png, svg = tmp_path / f"{name}.png", tmp_path / f"{name}.svg"
        plots.export(name, png)
        plots.export(name, svg)
        image = QImage(str(png))
        assert not image.isNull() and image.width() >= 800
        assert image.pixelColor(2, 2).name() == "#ffffff"  # on white, not transparent
        assert ET.parse(svg).getroot().tag.endswith("svg")
    # the legends scale with an export, as the axes do (pyqtgraph's default would not)
    import pyqtgraph as pg
    from PySide6.QtWidgets import QGraphicsItem

    legends = [i for p in plots.panels.values() for i in p.items if isinstance(i, pg.LegendItem)]
    flag = QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations
    assert len(legends) == 2 and not any(legend.flags() & flag for legend in legends)
    # an export carries its legend; the speedup plot has two axes for two quantities
    texts = "".join(ET.parse(tmp_path / "speedup.svg").getroot().itertext())
    for curve in (plots.speedup_measured, plots.speedup_predicted, plots.per_forward):
        assert curve.legend_name in texts
    assert "tokens / pass" in texts and "target alone" in texts
    assert plots.per_forward.getViewBox() is not plots.plots["speedup"].getViewBox()
    # hover: the values under the pointer
    assert "running: " + f"{figures[1].acceptance_running:.3f}" in plots.describe("acceptance", 2)
    assert plots.describe("acceptance", 7) == ""
    n1 = stats.accepted_lengths[1]
    assert plots.describe("accepted_length", 1).startswith(f"{n1} of 2 rounds")
    with pytest.raises(ValueError):
        plots.export("speedup", tmp_path / "x.gif")
    plots.clear()
    assert plots.series(plots.acceptance_running)[0].size == 0


def test_log_scale_hover_and_zero_mass_rows(qtbot):
    view = DistributionView()
    qtbot.addWidget(view)
    rnd = sample_rounds()[0]
    view.show_position(rnd, 1)  # the rejected draft
    linear = list(view.p_item.opts["width"])
    view.log_check.setChecked(True)  # redraws: bars from 1e-6 to log10(value)
    p = [view.bars.p[i] or 0.0 for i in view.rows]
    np.testing.assert_allclose(view.p_item.opts["width"], np.log10(np.maximum(p, 1e-6)) + 6)
    assert view.main.getPlotItem().getAxis("bottom").logMode and view.bars.p[0] == linear[0]
    # hover: every number of the row under the pointer, more digits where small
    text = view.describe_row(view.rows.index(view.bars.drafted_bar))
    assert "p (target) = 0.100" in text and "q (draft) = 0.600" in text
    assert "the drafted token (rejected)" in text and view.describe_row(99) == ""
    # a position whose top-N is mostly zero (temperature 0): only tokens with mass get rows
    event = rnd.tokens[0]
    greedy = dataclasses.replace(
        event, p=1.0, q=1.0, top=((1, 1.0, 1.0), (0, 0.0, 0.0), (2, 0.0, 0.0)),
        top_text=(" the", "A", " cat"), p_rest=0.0, q_rest=0.0, alpha=1.0,
    )  # fmt: skip
    view.log_check.setChecked(False)
    view.show_position(dataclasses.replace(rnd, tokens=(greedy, *rnd.tokens[1:])), 0)
    assert view.bars.n_bars == 4 and len(view.rows) == 2  # " the" and everything else
    ticks = view.token_labels
    assert not any(t.endswith("A") or t.endswith("cat") for t in ticks)


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_rows_follow_the_height_and_stay_put(qtbot, tmp_path):
    view = DistributionView()
    qtbot.addWidget(view)
    view.n_spin.setValue(20)
    view.resize(600, 380)  # a laptop's share of the window
    view.show()
    qtbot.waitExposed(view)
    rnd = sample_rounds()[0]
    view.show_position(rnd, 1)
    first = view.bars
    view.show_position(rnd, 1)  # the same position again: the same rows
    assert view.bars == first
    # the panel exports with its legend, as PNG and SVG
    view.export("distribution", tmp_path / "d.png")
    view.export("distribution", tmp_path / "d.svg")
    assert not QImage(str(tmp_path / "d.png")).isNull()
    svg = (tmp_path / "d.svg").read_text(encoding="utf-8")
    assert "accepted mass" in svg and "p (target" in svg  # the legend
    with pytest.raises(ValueError):
        view.export("distribution", tmp_path / "d.gif")


def test_small_probabilities_keep_their_significant_figures():
    """0.01 beside 0.00466 reads 0.0100, and the accept gauge's 0.00061 is not 0.00."""
    from specviz.gui.stream.figures import fmt

    assert fmt(0.01) == "0.0100" and fmt(0.00466) == "0.00466" and fmt(0.5) == "0.500"
    assert fmt(0.00061, 2) == "0.00061" and fmt(0.0) == "0.000"
