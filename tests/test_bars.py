"""core.metrics.position_bars from hand-made rounds whose full distributions are known, so every bar
(including the "everything else" one) can be checked against the exact answer."""

from __future__ import annotations

import dataclasses

import pytest

from specviz.core.metrics.position_bars import (
    REST_LABEL,
    events_at,
    position_bars,
    position_of,
    positions,
    tokens_at,
)
from tests.fixtures import sample_rounds


def test_positions_map_tokens_to_slots():
    r0, r1 = sample_rounds()
    assert positions(r0) == 4 and positions(r1) == 2
    assert [position_of(r0, i) for i in range(5)] == [0, 1, 2, 3, 1]
    assert tokens_at(r0, 1) == (1, 4)  # the rejected draft and its resampled replacement
    assert [t.status for t in events_at(r0, 1)] == ["rejected", "resampled"]
    assert events_at(r1, 1)[0] is None and events_at(r1, 1)[1].status == "bonus"
    with pytest.raises(IndexError):
        position_bars(r0, 7)


def test_accepted_position_bars_and_exact_rest():
    bars = position_bars(sample_rounds()[0], 0)
    assert bars.ids == (1, 2, 3, None) and bars.labels[-1] == REST_LABEL
    assert bars.p == pytest.approx((0.5, 0.2, 0.1, 0.2))
    assert bars.q == pytest.approx((0.4, 0.3, 0.15, 0.15))
    # the rest holds tokens 0, 4, 5: min = 0.05 + 0.05 + 0.05, excess = 0.05 + 0 + 0
    assert bars.min_pq == pytest.approx((0.4, 0.2, 0.1, 0.15))
    assert bars.excess == pytest.approx((0.1, 0.0, 0.0, 0.05))
    assert sum(bars.p) == pytest.approx(1) and sum(bars.q) == pytest.approx(1)
    assert bars.drafted_bar == bars.emitted_bar == 0
    assert (bars.accepted, bars.accept_prob, bars.u) == (True, 1.0, 0.3)
    assert bars.alpha == 0.85 and bars.rejection_mass == pytest.approx(0.15)
    assert bars.residual == () and bars.kind == "accepted"


def test_rejected_position_shows_residual():
    bars = position_bars(sample_rounds()[0], 1)
    assert bars.ids == (2, 0, 3, None)
    assert bars.labels[:3] == (" cat", "A", "\n")
    assert bars.min_pq == pytest.approx((0.1, 0.1, 0.1, 0.2))
    assert bars.excess == pytest.approx((0.0, 0.2, 0.2, 0.1))
    assert (bars.drafted_bar, bars.emitted_bar) == (0, 2)
    assert bars.accepted is False and bars.accept_prob == pytest.approx(1 / 6)
    assert bars.rejection_mass == pytest.approx(0.5)
    assert bars.residual_ids == (0, 3, 4, None)
    assert bars.residual == pytest.approx((0.4, 0.4, 0.1, 0.1))
    assert bars.residual_labels == ("A", "\n", "#4", REST_LABEL)  # "x" was not in this top
    assert bars.residual_bar == 1


def test_top_n_cut_keeps_drafted_and_emitted_and_the_mass():
    bars = position_bars(sample_rounds()[0], 1, n=1)
    assert bars.ids == (2, 3, None)  # the emitted "\n" stays visible below the cut
    assert bars.p == pytest.approx((0.1, 0.3, 0.6))
    assert bars.q == pytest.approx((0.6, 0.1, 0.3))
    assert sum(bars.min_pq) == pytest.approx(0.5)  # alpha, however many bars
    assert len(bars.residual) == 3  # one stored residual entry, the resampled token, rest


def test_residual_rows_are_cut_on_their_own():
    bars = position_bars(sample_rounds()[0], 1, residual_n=1)
    assert bars.ids == position_bars(sample_rounds()[0], 1).ids  # the top-N untouched
    assert bars.residual_ids == (0, 3, None)  # one stored entry, the resampled token, rest
    assert bars.residual == pytest.approx((0.4, 0.4, 0.2))  # the rest keeps the mass
    assert bars.residual_bar == 1


def test_discarded_position_has_only_q():
    bars = position_bars(sample_rounds()[0], 2)
    assert bars.ids == (0, 1, 2, 4, None)  # the drafted "x" added outside the stored top
    assert all(v is None for v in bars.p)
    assert bars.q == pytest.approx((0.2, 0.2, 0.2, 0.1, 0.3))
    assert all(v is None for v in bars.min_pq)
    assert bars.accepted is None and bars.alpha is None and bars.emitted_bar is None
    assert bars.kind == "discarded" and bars.drafted_bar == 3


def test_bonus_position_has_only_p():
    bars = position_bars(sample_rounds()[1], 1)
    assert bars.kind == "bonus" and bars.drafted_bar is None
    assert bars.emitted_bar == bars.ids.index(1)
    assert all(v is None for v in bars.q)
    assert sum(bars.p) == pytest.approx(1)
    assert bars.alpha is None and bars.accept_prob is None


def test_residual_bars_use_stored_residual_texts():
    r0 = sample_rounds()[0]
    resampled = dataclasses.replace(r0.tokens[4], residual_text=("A", "\n", "x"))
    rnd = dataclasses.replace(r0, tokens=(*r0.tokens[:4], resampled))
    assert position_bars(rnd, 1).residual_labels == ("A", "\n", "x", REST_LABEL)


def test_bars_of_a_trace_that_does_not_validate_are_still_drawn():
    """A null in a residual list (which validate names) is no bar, never a TypeError in
    the window, which parses a position's lists only when it shows them."""
    r0 = sample_rounds()[0]
    resampled = dataclasses.replace(r0.tokens[4], residual_top=((0, None), (3, 0.4)))
    rnd = dataclasses.replace(r0, tokens=(*r0.tokens[:4], resampled))
    bars = position_bars(rnd, 1)
    assert bars.residual[0] == 0.4 and bars.residual_ids[0] == 3


def test_the_residual_bars_leave_out_tokens_with_no_mass():
    """A residual whose support is smaller than the stored top-N pads its list with zeros
    (torch.topk): those are not bars."""
    r0 = sample_rounds()[0]
    token = r0.tokens[4]
    padded = ((token.id, 0.6), (5, 0.4), (1, 0.0), (2, 0.0))
    resampled = dataclasses.replace(token, residual_top=padded, residual_text=())
    rnd = dataclasses.replace(r0, tokens=(*r0.tokens[:4], resampled))
    assert position_bars(rnd, 1).residual_ids == (token.id, 5, None)
