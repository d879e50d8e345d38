"""Schema 1.1: optional round and header fields round-trip; 1.0 traces read as before."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from specviz.core.trace.files import parse_lines, session_lines
from specviz.core.trace.parse import schema_version
from specviz.core.trace.records import (
    SCHEMA,
    SCHEMA_MAJOR,
    SCHEMA_MINOR,
    Round,
    TraceError,
)
from specviz.core.trace.rounds import with_extras
from tests.fixtures import synthetic_session


def _lines(session) -> list[dict]:
    return [orjson.loads(line) for line in session_lines(session)]


def test_new_fields_round_trip():
    session = synthetic_session(n_rounds=3)
    header = dataclasses.replace(
        session.header,
        drafter={"kind": "lookup", "ngram_max": 3},
        policy={"kind": "heuristic", "k_start": 4},
    )
    rounds: list[Round] = [
        with_extras(
            dataclasses.replace(
                rnd, k=5, stop="no_match" if rnd.index == 1 else "k", events_ms=0.25
            ),
            probes={"context_len": 9, "target_ms": [[1, 2.5], [5, 4.0]], "draft_ms": 1.0},
            copied_from=(2, 6),
        )
        for rnd in session.rounds
    ]
    session.header = header
    session.rounds[:] = rounds
    objs = _lines(session)
    assert objs[0]["schema"] == SCHEMA  # 1.2 since (test_schema_12)
    assert objs[0]["drafter"] == {"kind": "lookup", "ngram_max": 3}
    assert objs[2]["stop"] == "no_match" and objs[2]["copied_from"] == [2, 6]
    back = parse_lines(list(session_lines(session)))
    assert back.warnings == []
    assert back.header.drafter == header.drafter and back.header.policy == header.policy
    assert back.header.extra == {}
    for a, b in zip(back.rounds, rounds, strict=True):
        assert (a.k, a.stop, a.events_ms, a.probes, a.copied_from) == (
            b.k, b.stop, b.events_ms, b.probes, b.copied_from,
        )  # fmt: skip


def test_a_1_0_trace_reads_without_the_new_fields_or_a_warning():
    session = synthetic_session(n_rounds=2)
    objs = _lines(session)
    objs[0]["schema"] = "specviz.trace/1"
    back = parse_lines([orjson.dumps(o) for o in objs])
    assert back.warnings == []
    assert back.header.drafter is None and all(r.k is None and r.stop is None for r in back.rounds)


def test_a_newer_minor_version_warns():
    objs = _lines(synthetic_session(n_rounds=1))
    objs[0]["schema"] = f"specviz.trace/{SCHEMA_MAJOR}.{SCHEMA_MINOR + 1}"
    back = parse_lines([orjson.dumps(o) for o in objs])
    assert any("newer than this specviz" in w for w in back.warnings)


@pytest.mark.parametrize(
    "schema", ["specviz.trace/1.x", "specviz.trace/01", "specviz.trace/1.", "specviz.trace/²",
               "specviz.trace/１", "specviz.trace/١", "specviz.trace/1.1.1", "other/1"],
)  # fmt: skip
def test_schema_strings_that_are_not_versions(schema):
    with pytest.raises(TraceError, match="not a specviz trace schema"):
        schema_version(schema)


def test_unknown_stop_reason_is_refused():
    objs = _lines(synthetic_session(n_rounds=1))
    objs[1]["stop"] = "bored"
    with pytest.raises(TraceError, match="line 2: field 'stop'"):
        parse_lines([orjson.dumps(o) for o in objs])
