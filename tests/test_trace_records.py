"""The trace records are plain frozen values, and the format's vocabulary is defined once,
next to them (core.trace.records): the writer's and the reader's field lists derive from it."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from specviz.core.trace import records as trace
from specviz.core.trace.extras.registry import BY_KEY
from specviz.core.trace.files import parse_lines, session_lines
from specviz.core.trace.records import Round, SessionHeader, TokenEvent
from tests.fixtures import synthetic_session


def test_token_event_init_takes_its_fields_in_order():
    """TokenEvent sets its fields in one step (a hand-written __init__): it must take every
    field, in order, with the field's default."""
    params = list(inspect.signature(TokenEvent.__init__).parameters.values())[1:]
    fields = dataclasses.fields(TokenEvent)
    assert [p.name for p in params] == [f.name for f in fields]
    assert [p.default for p in params] == [
        inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default for f in fields
    ]
    event = TokenEvent(1, "a", "accepted", p=0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.p = 0.25  # type: ignore[misc]
    assert dataclasses.replace(event, q=0.5) == TokenEvent(1, "a", "accepted", p=0.5, q=0.5)


def test_a_loaded_round_is_a_plain_value():
    """A loaded round holds no line and parses nothing: equality and hashing are a frozen
    dataclass's, and the loaded session (not the round) has the deferred top-N lists."""
    session = synthetic_session(3)
    back = parse_lines(line.encode() for line in session_lines(session))
    names = {f.name for f in dataclasses.fields(Round)}
    assert "source" not in names and not hasattr(Round, "complete")
    loaded = back.rounds[0]
    assert loaded != session.rounds[0]  # its top-N lists are not in the record
    assert back.details(0) == session.rounds[0]
    assert hash(back.details(0)) == hash(session.rounds[0])


def test_field_lists_derive_from_the_records():
    assert trace.EVENT_NUMBERS == (
        "p", "q", "accept_prob", "u", "alpha", "residual", "p_rest", "q_rest",
        "unjudged_p", "unjudged_p_rest", "p_tried", "q_tried",
    )  # fmt: skip
    assert trace.EVENT_LISTS == (
        "top", "top_text", "residual_top", "residual_text", "unjudged_top_p",
    )  # fmt: skip
    assert set(trace.UNJUDGED) <= {*trace.EVENT_NUMBERS, *trace.EVENT_LISTS}
    assert "u" not in trace.PROBABILITIES and "alpha" in trace.PROBABILITIES
    assert trace.HEADER_OPTIONAL == ("drafter", "policy", "eos_token_id", "chat", "dtype_choice")
    header_fields = {f.name for f in dataclasses.fields(SessionHeader)} - {"extra"}
    assert trace.HEADER_KEYS == {"type", "schema", *header_fields}
    assert set(trace.ROUND_OPTIONAL) >= {"finish_reason", "k", "stop"}
    assert {"probes", "copied_from", "block", "tree"} <= set(BY_KEY)  # extras: their registry
    assert set(trace.NUMBERS_BY_STATUS) == set(trace.STATUSES)
    assert set(trace.DRAFTED) | set(trace.ENDINGS) == set(trace.STATUSES)
