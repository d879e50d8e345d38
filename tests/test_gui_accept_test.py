"""The accept-test panel and the words beside it say what the numbers say (issue 37): the sign
between the figures follows the figures, under the token-wise, block and typical rules; a
block round shows the block's own test (u against h_i); a draw u < 1 never reads "1.000"; the
stream's dotted "kept beyond the token-wise stop" mark is in the legend and survives a
selection."""

from __future__ import annotations

import dataclasses
import html

import pytest
from PySide6.QtGui import QTextCharFormat

from specviz.core.metrics.position_bars import PositionBars
from specviz.core.trace.records import Round, Settings, TokenEvent
from specviz.core.trace.rounds import with_extras
from specviz.core.trace.rule_numbers import kept_beyond_token_stop
from specviz.gui import palette
from specviz.gui.distribution.accept_gauge import AcceptGauge, accept_test
from specviz.gui.distribution.text import drafted_tag, summary_html
from specviz.gui.stream.figures import fmt, fmt_pair
from specviz.gui.stream.panel import StreamPanel


def bars(status="accepted", p=0.4, q=0.5, u=0.3, block=None, kept=None, threshold=None):
    event = TokenEvent(7, " of", status, p=p, q=q, accept_prob=min(1.0, p / q), u=u)
    return PositionBars(
        round_index=0, position=0, drafted_event=event, emitted_event=event,
        ids=(7, None), labels=(" of", "(everything else)"), p=(p, 1 - p), q=(q, 1 - q),
        min_pq=(min(p, q), None), excess=(max(0.0, p - q), None), drafted_bar=0,
        emitted_bar=0, accept_prob=min(1.0, p / q), u=u, accepted=status == "accepted",
        alpha=0.8, rejection_mass=0.2, block=block, block_kept=kept,
        typical_threshold=threshold, typical=threshold is not None, round_drafted=3,
    )  # fmt: skip


CASES = [
    # token-wise: the fate is the test u < min(1, p/q)
    (bars("accepted", u=0.3), "u 0.300 < 0.800", True),
    (bars("rejected", u=0.95), "u 0.950 \u2265 0.800", False),
    # block: a draft the block keeps although its own u_i >= h_i (a later u_j < h_j)
    (bars("accepted", u=0.95, block=(0.8, 0.76, 0.95), kept=3), "u 0.950 \u2265 h 0.760", False),
    (bars("accepted", u=0.2, block=(0.8, 0.76, 0.2), kept=1), "u 0.200 < h 0.760", True),
    (bars("rejected", u=0.9, block=(0.3, 0.25, 0.9), kept=0), "u 0.900 \u2265 h 0.250", False),
    # typical (lossy): p against its threshold, whatever u is
    (bars("accepted", p=0.4, u=0.99, threshold=0.1), "p 0.400 > 0.100", True),
    (bars("rejected", p=0.05, q=0.01, u=0.1, threshold=0.09), "p 0.0500 \u2264 0.0900", False),
]


@pytest.mark.parametrize(("position", "label", "passes"), CASES)
def test_the_sign_follows_the_numbers(position, label, passes):
    test = accept_test(position)
    assert test.label == label and test.passes is passes
    words = test.label.split()
    left, sign, right = float(words[1]), words[2], float(words[-1])
    holds = {"<": left < right, "\u2265": left >= right, ">": left > right, "\u2264": left <= right}
    assert holds[sign]


@pytest.mark.parametrize(("position", "label", "passes"), CASES)
def test_the_gauge_draws_the_rules_own_test(qtbot, position, label, passes):
    gauge = AcceptGauge()
    qtbot.addWidget(gauge)
    gauge.draw(position)
    title = gauge.getPlotItem().titleLabel
    assert html.escape(label) in title.text  # rich text: "<" escaped, shown as "<"
    assert title.item.toPlainText() == label
    test = accept_test(position)
    xs, ys = gauge.threshold.getData()
    assert list(ys) == [test.line, test.line]  # the line is h_i in a block round, not min(1,p/q)
    assert gauge.u_mark.data["y"][0] == test.mark
    # the accept region is where the rule keeps: below the line, above it for typical
    region = gauge.accept_region.opts
    assert region["y0"][0] == (test.line if test.accept_above else 0.0)


def test_a_block_summary_says_the_block_test_and_what_token_wise_would_do():
    text = summary_html(bars("accepted", u=0.95, block=(0.8, 0.76, 0.95), kept=3))
    assert "u = 0.950 &ge; 0.760" in text and "3 of them" in text
    assert "would decide alone" not in text
    assert "u = 0.950 &ge; 0.800, a test it fails" in text  # token-wise, the same draw


def test_rejected_is_the_word_and_u_below_one_never_reads_one():
    assert drafted_tag(bars("rejected", u=0.95)) == "rejected \u25b8"
    assert fmt(0.99996) == "0.99996" and fmt(0.9994) == "0.999" and fmt(1.0) == "1.000"
    assert fmt_pair(0.7604, 0.7601) == ("0.7604", "0.7601")
    assert "1.000" not in accept_test(bars("rejected", p=0.5, q=0.6, u=0.99996)).label


def block_round() -> Round:
    """Three drafts kept by a block whose token-wise test fails at the second."""
    settings = Settings(k=3, verifier="block")
    tokens = (
        TokenEvent(1, "a", "accepted", p=0.5, q=0.5, accept_prob=1.0, u=0.5),
        TokenEvent(2, "b", "accepted", p=0.2, q=0.5, accept_prob=0.4, u=0.9),
        TokenEvent(3, "c", "accepted", p=0.5, q=0.5, accept_prob=1.0, u=0.1),
        TokenEvent(4, "d", "bonus", p=0.3),
    )
    rnd = Round(
        session_id="s", index=0, context_len=1, draft_ms=1.0, verify_ms=1.0, n_drafted=3,
        n_accepted=3,
        tokens=tokens, settings=settings,
    )  # fmt: skip
    return with_extras(
        rnd, block={"weights": [1.0, 0.4, 0.4], "h": [0.0, 0.1, 0.4], "u": [0.5, 0.9, 0.1]}
    )


def test_the_dotted_mark_is_in_the_legend_and_survives_the_selection(qtbot):
    rnd = block_round()
    assert kept_beyond_token_stop(rnd) == {1, 2}
    panel = StreamPanel()
    qtbot.addWidget(panel)
    panel.clear(None)
    assert "dotted" not in panel.legend.text()
    panel.append_rounds([rnd])
    assert "dotted underline" in panel.legend.text()
    assert panel.legend.text() == palette.fate_legend_html(beyond=True)
    view = panel.view
    view.select(0, 1)
    style = QTextCharFormat.UnderlineStyle
    assert view.extraSelections()[0].format.underlineStyle() == style.DotLine
    view.select(0, 0)  # a draft token-wise keeps too: the usual underline
    assert view.extraSelections()[0].format.underlineStyle() == style.SingleUnderline
    token_round = with_extras(dataclasses.replace(rnd, settings=Settings(k=3), index=1), block=None)
    assert kept_beyond_token_stop(token_round) == set()
