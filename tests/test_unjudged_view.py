"""The target's p at a discarded position (schema 1.2), in the bars and the window: shown
next to q, labelled as never judged, and nothing that suggests an accept test ran there. A
1.1 trace without it shows q alone, as before."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from PySide6.QtCore import Qt

from specviz.core.metrics.position_bars import position_bars
from specviz.core.trace.records import TokenEvent
from specviz.gui.distribution.text import MAIN_TITLE, UNJUDGED_TITLE
from specviz.gui.distribution.view import DistributionView
from specviz.gui.stream.token_view import token_tooltip
from tests.fixtures import sample_rounds

# Sample round 0's first discarded draft, "x" (id 4, q = 0.1), at position 2, with the
# target's p there: (0.05, 0.05, 0.1, 0.1, 0.5, 0.2) over the six tokens, q as Q2. Its top 3
# by max(p, q): x (0.5 / 0.1), A (0.05 / 0.2), " the" (0.05 / 0.2); the rest p 0.4, q 0.5.
UNJUDGED = dict(
    top=((4, None, 0.1), (0, None, 0.2), (1, None, 0.2)),
    top_text=("x", "A", " the"),
    q_rest=0.5,
    unjudged_p=0.5,
    unjudged_p_rest=0.4,
    unjudged_top_p=(0.5, 0.05, 0.05),
)


def rounds_12():
    """Sample round 0 as 1.2 records it, and as 1.1 did."""
    r0 = sample_rounds()[0]
    tokens = list(r0.tokens)
    assert (tokens[2].id, tokens[2].status, tokens[2].q) == (4, "discarded", 0.1)
    tokens[2] = TokenEvent(4, "x", "discarded", q=0.1, **UNJUDGED)
    return dataclasses.replace(r0, tokens=tuple(tokens)), r0


def test_bars_show_p_where_no_accept_test_ran():
    new, old = rounds_12()
    bars = position_bars(new, 2)
    assert bars.kind == "discarded" and bars.p_never_judged
    assert bars.ids == (4, 0, 1, None) and bars.drafted_bar == 0
    assert bars.p == pytest.approx((0.5, 0.05, 0.05, 0.4))
    assert bars.q == pytest.approx((0.1, 0.2, 0.2, 0.5))
    # no min(p, q), no residual's mass, no draw, no alpha: nothing was judged here
    assert set(bars.min_pq) == set(bars.excess) == {None}
    assert (bars.accept_prob, bars.u, bars.accepted, bars.alpha) == (None,) * 4
    assert bars.residual == () and bars.rejection_mass is None
    cut = position_bars(new, 2, n=1)  # the rest keeps the mass of what is cut
    assert cut.ids == (4, None) and cut.p == pytest.approx((0.5, 0.5))
    before = position_bars(old, 2)  # a 1.1 trace: q alone, as before
    assert not before.p_never_judged and set(before.p) == {None}
    assert position_bars(new, 0) == position_bars(old, 0)  # other positions unchanged


def test_the_window_labels_p_as_never_judged(qtbot):
    view = DistributionView()
    qtbot.addWidget(view)
    new, old = rounds_12()
    title = view.main.getPlotItem().titleLabel
    view.show_position(new, 2)
    assert title.text == UNJUDGED_TITLE
    widths = np.asarray(view.p_item.opts["width"])
    np.testing.assert_allclose(widths, [0.5, 0.05, 0.05, 0.4])
    assert view.p_item.opts["pen"].style() == Qt.PenStyle.DashLine
    assert not np.any(view.min_item.opts["width"]) and not np.any(view.excess_item.opts["width"])
    summary = view.summary.text()
    assert "never judged" in summary and "p = 0.500" in summary
    assert "no accept test" in summary and "earlier draft of the round was rejected" in summary
    assert "min(1, p/q)" not in summary and "\u03b1" not in summary
    row = view.describe_row(0)
    assert "p (target, never judged) = 0.500" in row and "q (draft) = 0.100" in row
    assert "min(p, q) = no accept test here" in row
    assert view.residual_plot.getPlotItem().titleLabel.text == "residual: none"
    assert view.gauge.u_mark.getData()[0].size == 0
    assert "p (target, never judged) = 0.500" in token_tooltip(new, 2)
    # text from the trace stays plain in the new sentence
    tokens = list(new.tokens)
    tokens[2] = dataclasses.replace(tokens[2], text="<img src=x>")
    view.show_position(dataclasses.replace(new, tokens=tuple(tokens)), 2)
    assert "<img" not in view.summary.text() and "&lt;img src=x&gt;" in view.summary.text()
    # a 1.1 trace shows what it showed: q alone, the usual title, no p
    view.show_position(old, 2)
    assert title.text == MAIN_TITLE and not np.any(view.p_item.opts["width"])
    assert "no accept test" not in view.summary.text() and "never judged" in view.summary.text()
    assert "p (target) = n/a" in token_tooltip(old, 2)
    # and a judged position after it: solid p, the usual title
    view.show_position(new, 0)
    assert title.text == MAIN_TITLE
    assert view.p_item.opts["pen"].style() == Qt.PenStyle.SolidLine


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_the_never_judged_title_fits_a_laptop_screen(qtbot):
    """At 1280 x 720 the panel is about 700 px wide: its main plot's title must not be cut."""
    view = DistributionView()
    qtbot.addWidget(view)
    view.resize(700, 450)
    view.show()
    new, _ = rounds_12()
    view.show_position(new, 2)
    qtbot.wait(50)
    title = view.main.getPlotItem().titleLabel
    text = title.item.sceneBoundingRect()
    assert text.left() >= 0 and text.right() <= view.main.width(), title.text
