"""core.bars from hand-made rounds whose full distributions are known, so every bar
(including the "everything else" one) can be checked against the exact answer."""

from __future__ import annotations

import dataclasses

import pytest

from specviz.core.bars import (
    REST_LABEL,
    events_at,
    position_bars,
    position_of,
    positions,
    tokens_at,
)
from specviz.core.trace import ModelInfo, Round, SessionHeader, Settings, TokenEvent

TEXTS = ("A", " the", " cat", "\n", "x", "ly")
# Round 0 (K=4): " the" accepted, " cat" rejected, "x" and "ly" discarded, "\n" resampled.
P0 = (0.1, 0.5, 0.2, 0.1, 0.05, 0.05)
Q0 = (0.05, 0.4, 0.3, 0.15, 0.05, 0.05)  # alpha = sum min = 0.85
P1 = (0.3, 0.1, 0.1, 0.3, 0.1, 0.1)
Q1 = (0.1, 0.1, 0.6, 0.1, 0.05, 0.05)  # alpha = 0.5; residual norm(max(0, p-q)) below
RESIDUAL1 = (0.4, 0.0, 0.0, 0.4, 0.1, 0.1)
Q2 = (0.2, 0.2, 0.2, 0.2, 0.1, 0.1)
N = 3  # top-N stored per position


def _top(p, q, n=N):
    key = [max(a or 0, b or 0) for a, b in zip(p or [0] * 6, q or [0] * 6)]
    ids = sorted(range(6), key=lambda i: -key[i])[:n]
    entries = tuple((i, None if p is None else p[i], None if q is None else q[i]) for i in ids)
    texts = tuple(TEXTS[i] for i in ids)
    p_rest = None if p is None else 1 - sum(p[i] for i in ids)
    q_rest = None if q is None else 1 - sum(q[i] for i in ids)
    return entries, texts, p_rest, q_rest


def _event(token, status, p, q, **kw):
    top, texts, p_rest, q_rest = _top(p, q)
    return TokenEvent(
        id=token, text=TEXTS[token], status=status,
        p=None if p is None else p[token], q=None if q is None else q[token],
        top=top, top_text=texts, p_rest=p_rest, q_rest=q_rest, **kw,
    )  # fmt: skip


def sample_rounds(session_id: str = "s1") -> list[Round]:
    """Two rounds: [accepted, rejected, discarded, discarded, resampled], then
    [accepted, bonus]."""
    settings = Settings(k=4, top_n=N)
    r0 = (
        _event(1, "accepted", P0, Q0, accept_prob=1.0, u=0.3, alpha=0.85),
        _event(2, "rejected", P1, Q1, accept_prob=0.1 / 0.6, u=0.8, alpha=0.5),
        _event(4, "discarded", None, Q2),
        _event(5, "discarded", None, Q2),
        _event(
            3, "resampled", P1, Q1, alpha=0.5, residual=0.4,
            residual_top=((0, 0.4), (3, 0.4), (4, 0.1)),
        ),
    )  # fmt: skip
    r1 = (
        _event(0, "accepted", P0, P0, accept_prob=1.0, u=0.9, alpha=1.0),
        _event(1, "bonus", P0, None),
    )
    return [
        Round(session_id, 0, 3, 2.0, 5.0, 4, 1, r0, settings),
        Round(session_id, 1, 5, 1.0, 4.0, 1, 1, r1, Settings(k=1, top_n=N)),
    ]


def sample_header(session_id: str = "s1") -> SessionHeader:
    info = ModelInfo("toy", "/toy", 6, 100, "float32", "cpu")
    return SessionHeader(
        session_id=session_id, prompt="Once upon", prompt_ids=(0, 1, 2), target=info,
        draft=info, settings=Settings(k=4, top_n=N), created="2026-01-01T00:00:00+00:00",
        specviz="test", baseline_ms_per_token=10.0, draft_ms_per_token=2.0,
        prompt_text=("Once", " up", "on"),
    )  # fmt: skip


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
