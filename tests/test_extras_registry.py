"""A round extra registered from this file alone (core.trace.extras): made by make_round from
the engine's form, written last on its round's line, read back strictly (a broken one named
by line and field), checked against its round by check_session, and said by the stream. What
a new rule with recorded numbers adds beyond its rule module and its VerifierSpec line is its
extra and one line in registry.EXTRAS; what every extra today touches: the modules under
core/trace/extras and their lines in EXTRAS."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from specviz.core.trace.check_session import check_session
from specviz.core.trace.extras import registry
from specviz.core.trace.extras.base import Extra, Found, PositionTest
from specviz.core.trace.files import parse_lines, round_text, session_lines
from specviz.core.trace.parse import parse_round
from specviz.core.trace.records import (
    Round,
    SessionHeader,
    Settings,
    TokenEvent,
    TraceError,
)
from specviz.core.trace.rounds import make_round
from specviz.core.trace.session import Session
from tests.fixtures import synthetic_session


@dataclass(frozen=True)
class Chosen(Extra):
    """A made-up rule's numbers: which drafts a k-sequential selection chose."""

    key = "chosen"
    since = (1, 10)

    drafts: tuple[int, ...]

    @classmethod
    def from_json(cls, value: dict[str, Any], line: int | None) -> Chosen:
        drafts = value.get("drafts")
        if type(drafts) is not list or not all(type(d) is int and d >= 0 for d in drafts):
            raise TraceError("expected draft indexes (integers >= 0)", line, "chosen.drafts")
        return cls(tuple(drafts))

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> Chosen:
        return cls(tuple(value["drafts"]))

    def to_json(self) -> dict[str, Any]:
        return {"drafts": list(self.drafts)}

    @classmethod
    def check(cls, rnd: Round, settings: Settings, header: SessionHeader) -> Found:
        chosen = rnd.extra(cls)
        if chosen is not None and any(d >= rnd.n_drafted for d in chosen.drafts):
            yield "chosen.drafts", f"a draft past the round's {rnd.n_drafted}"

    def round_note(self, rnd: Round) -> str:
        return f"chose {len(self.drafts)} of the drafts"

    def token_note(self, rnd: Round, index: int, fmt: Callable[[float], str]) -> str | None:
        return "chosen" if index in self.drafts else None

    def position_test(self, rnd: Round, position: int, drafted: TokenEvent | None):
        if position not in self.drafts or drafted is None or drafted.u is None:
            return None
        u = drafted.u
        return PositionTest("u vs c", u, 0.5, u < 0.5, False, "u", "c", "a made-up rule")


@pytest.fixture
def registered(monkeypatch):
    """Chosen's one line in EXTRAS (and the index the registry derives from it)."""
    monkeypatch.setattr(registry, "EXTRAS", (*registry.EXTRAS, Chosen))
    monkeypatch.setitem(registry.BY_KEY, Chosen.key, Chosen)


def with_chosen(rnd: Round, value: Any) -> Round:
    """The round rebuilt by make_round with the extra in the engine's form (a dict)."""
    fields = {name: getattr(rnd, name) for name in ("session_id", "index", "context_len",
              "draft_ms", "verify_ms", "n_drafted", "n_accepted", "tokens", "settings",
              "finish_reason")}  # fmt: skip
    scalars = {"k": rnd.k, "stop": rnd.stop, "events_ms": rnd.events_ms}
    return make_round(**fields, extras={**scalars, **rnd.extras, "chosen": value})


def test_an_unregistered_extra_is_refused():
    rnd = synthetic_session(1).rounds[0]
    with pytest.raises(TypeError, match="not a round's extra: chosen"):
        with_chosen(rnd, {"drafts": [0]})


def test_an_extra_registered_alone_is_made_written_read_checked_and_said(registered):
    session = synthetic_session(3)
    rnd = with_chosen(session.rounds[1], {"drafts": [0, 1]})
    assert rnd.extra(Chosen) == Chosen((0, 1)) and rnd.extras["chosen"] is rnd.extra(Chosen)
    line = round_text(rnd)
    assert list(json.loads(line))[-1] == "chosen"  # after every older field: lines keep bytes
    back = parse_round(json.loads(line), rnd.session_id, 3)
    assert back == rnd and round_text(back) == line
    with pytest.raises(TraceError) as error:
        parse_round({**json.loads(line), "chosen": {"drafts": [-1]}}, rnd.session_id, 3)
    assert str(error.value) == (
        "line 3: field 'chosen.drafts': expected draft indexes (integers >= 0)"
    )
    session.rounds[1] = rnd
    loaded = parse_lines(list(session_lines(session)))
    assert loaded.details(1).extra(Chosen) == Chosen((0, 1))
    assert check_session(loaded) == []
    session.rounds[1] = with_chosen(session.rounds[1], {"drafts": [0, 99]})
    problems = check_session(Session(session.header, session.rounds))
    assert [(p.line, p.field) for p in problems] == [(3, "chosen.drafts")]


def test_the_stream_says_what_a_registered_extra_says(registered, qtbot):
    from specviz.gui.stream.token_view import k_text, token_tooltip

    rnd = with_chosen(synthetic_session(2).rounds[1], {"drafts": [0]})
    assert "chose 1 of the drafts" in k_text(rnd)
    assert "chosen" in token_tooltip(rnd, 0) and "chosen" not in token_tooltip(rnd, 1)


def test_the_distribution_panel_shows_a_registered_rules_test(registered, qtbot):
    from specviz.core.metrics.position_bars import position_bars
    from specviz.gui.distribution.accept_gauge import accept_test, axis_label
    from specviz.gui.distribution.text import summary_html

    rnd = with_chosen(synthetic_session(2).rounds[1], {"drafts": [0]})
    bars = position_bars(rnd, 0)
    assert bars.test is not None and bars.test.mark == rnd.tokens[0].u
    sign = "<" if bars.test.passes else "\u2265"
    assert accept_test(bars).label.startswith("u ") and f"{sign} c 0.500" in accept_test(bars).label
    assert axis_label(bars) == "u vs c"
    assert "judged by the round's rule (u vs c); a made-up rule: u = " in summary_html(bars)


def test_block_and_typical_give_their_test_as_the_panel_showed_it():
    """The tests the block and typical extras give at a position are the numbers the panel
    read from them before (its own words for these two rules are kept)."""
    from pathlib import Path

    from specviz.core.metrics.position_bars import position_bars, positions
    from specviz.core.trace.files import load

    folder = Path(__file__).parent / "data" / "old_traces"
    seen = 0
    for name in ("block-1.3.jsonl", "typical-1.4.jsonl"):
        session = load(folder / name)
        for rnd in session.rounds:
            for position in range(positions(rnd)):
                bars = position_bars(session.details(rnd.index), position)
                if bars.accept_prob is None:
                    assert bars.test is None
                    continue
                if bars.block is not None:
                    assert (bars.test.mark, bars.test.line) == (bars.block[2], bars.block[1])
                    seen += 1
                elif bars.typical_threshold is not None:
                    assert bars.test.line == bars.typical_threshold and bars.test.above
                    assert bars.test.passes == bars.accepted
                    seen += 1
    assert seen >= 4


def test_an_extra_in_another_order_writes_back_as_read():
    """A hand-written match or probe, its fields in another order (null ones kept), is
    written back byte for byte, as the reader kept it before the extras were typed."""
    rnd = synthetic_session(1).rounds[0]
    line = json.loads(round_text(rnd))
    line["matched"] = {"probs": [1, 0.5], "source": "cache", "count": 2, "length": 3}
    line["probes"] = {"t1_ms": [2, 2.5], "context_len": None, "target_ms": [[1, 2.0]], "x": 1}
    back = parse_round(line, rnd.session_id, 2)
    written = json.loads(round_text(back))
    assert json.dumps(written["matched"]) == json.dumps(line["matched"])
    assert json.dumps(written["probes"]) == json.dumps(
        {"t1_ms": [2.0, 2.5], "context_len": None, "target_ms": [[1, 2.0]], "x": 1}
    )


def test_no_registered_extra_is_newer_than_the_schema_written():
    """A new extra's `since` raises records.SCHEMA with it: a trace holding it never says an
    older minor (whose readers would not know its key or its rule)."""
    from specviz.core.trace.records import SCHEMA, SCHEMA_MAJOR, SCHEMA_MINOR

    newest = max(extra.since for extra in registry.EXTRAS)
    assert newest <= (SCHEMA_MAJOR, SCHEMA_MINOR) == newest  # the schema is the newest extra's
    assert SCHEMA == f"specviz.trace/{SCHEMA_MAJOR}.{SCHEMA_MINOR}"
