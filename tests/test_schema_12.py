"""Schema 1.2: the target's p at discarded positions (issue 15 item 6).

The target's one pass scores all K + 1 positions, so at a draft after the round's first
rejection p exists though no accept test ran on it. 1.2 records it in fields of its own
(unjudged_p, unjudged_p_rest, unjudged_top_p aligned with `top`), leaving p / p_rest / top's
p column absent there as in 1.1: a 1.1 reader, which ignores unknown token fields and reads
a newer minor version with a warning, still reads a 1.2 trace as valid."""

from __future__ import annotations

import dataclasses
import json
import math
import threading

import orjson
import pytest

from specviz.cli.main import main
from specviz.core.decoding import token_events as events_module
from specviz.core.decoding.warp import SamplingConfig
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.metrics.position_bars import position_bars, position_of
from specviz.core.trace.check_session import check_session
from specviz.core.trace.files import load, parse_lines, save, session_lines
from specviz.core.trace.records import SCHEMA, UNJUDGED, Settings, TokenEvent, TraceError
from specviz.core.trace.serialize import round_to_json
from specviz.core.trace.session import Session
from tests.test_engine import fresh_probs

SETTINGS = Settings(k=5, seed=2, max_new_tokens=50)  # every status, on the test pair
PROMPT = "In the beginning"
TIMINGS = ("draft_ms", "verify_ms", "events_ms", "probes")


def run(pair, settings: Settings = SETTINGS) -> Session:
    engine = SpeculativeEngine(pair, settings)
    session = Session(engine.prefill(PROMPT, calibrate=False))
    for rnd in engine.run():
        session.append(rnd)
    return session


@pytest.fixture(scope="module")
def live(pair) -> Session:
    return run(pair)


def discarded(session: Session) -> list[tuple[int, int]]:
    """(round, token) of every discarded token."""
    return [
        (rnd.index, j)
        for rnd in session.rounds
        for j, t in enumerate(rnd.tokens)
        if t.status == "discarded"
    ]


def first(session: Session, status: str) -> tuple[int, int]:
    return next(
        (r.index, j) for r in session.rounds for j, t in enumerate(r.tokens) if t.status == status
    )


def edit(session: Session, at: tuple[int, int], **changes) -> Session:
    i, j = at
    rounds = list(session.rounds)
    tokens = list(rounds[i].tokens)
    tokens[j] = dataclasses.replace(tokens[j], **changes)
    rounds[i] = dataclasses.replace(rounds[i], tokens=tuple(tokens))
    return Session(session.header, rounds)


def without_unjudged(obj: dict) -> dict:
    """A round line as a 1.1 writer would have written it."""
    for token in obj["tokens"] if obj.get("type") == "round" else ():
        for key in UNJUDGED:
            token.pop(key, None)
    return obj


def wire(rnd, drop=TIMINGS) -> dict:
    return {k: v for k, v in round_to_json(rnd).items() if k not in drop}


# ---------------------------------------------------------------------------------- engine


def test_engine_records_the_targets_p_at_discarded_positions(pair, live):
    config = SamplingConfig(SETTINGS.temperature, SETTINGS.top_k, SETTINGS.top_p)
    spots = discarded(live)
    assert len(spots) >= 2
    for i, j in spots:
        rnd = live.rounds[i]
        t = rnd.tokens[j]
        # The context the target scored it in: everything before the round, then the drafts
        # before it (the rejected one included).
        before = [e.id for e in rnd.tokens[:j]]
        context = list(live.header.prompt_ids) + [
            e.id for r in live.rounds[:i] for e in r.tokens if e.emitted
        ]
        assert len(context) == rnd.context_len
        p = fresh_probs(pair.target, context + before, pair.vocab_size, config)
        assert t.p is None and t.p_rest is None and all(e[1] is None for e in t.top)  # as 1.1
        assert t.unjudged_p == pytest.approx(float(p[t.id]), abs=1e-5)
        assert len(t.unjudged_top_p) == len(t.top) == SETTINGS.top_n
        for (token, _, _), recorded in zip(t.top, t.unjudged_top_p, strict=True):
            assert recorded == pytest.approx(float(p[token]), abs=1e-5)
        rest = 1 - sum(float(p[e[0]]) for e in t.top)
        assert t.unjudged_p_rest == pytest.approx(max(0.0, rest), abs=1e-4)


def test_recording_them_changes_no_sampling(pair, live, monkeypatch):
    assert any(live.rounds[i].tokens[j].unjudged_p is not None for i, j in discarded(live))

    def event_without(*args, **kw):  # the records as 1.1 made them
        for key in UNJUDGED:
            kw.pop(key, None)
        return TokenEvent(*args, **kw)

    monkeypatch.setattr(events_module, "TokenEvent", event_without)
    before = run(pair)
    assert not any(before.rounds[i].tokens[j].unjudged_p for i, j in discarded(before))
    emitted = [[t.id for t in r.tokens if t.emitted] for r in live.rounds]
    assert [[t.id for t in r.tokens if t.emitted] for r in before.rounds] == emitted
    assert [without_unjudged(wire(r)) for r in live.rounds] == [wire(r) for r in before.rounds]


def test_without_top_lists_the_tokens_own_p_is_recorded(pair, live):
    engine = SpeculativeEngine(pair, SETTINGS, trace=False)  # no top-N lists at all
    session = Session(engine.prefill(PROMPT, calibrate=False))
    for rnd in engine.run():
        session.append(rnd)
    spots = discarded(session)
    assert spots
    for i, j in spots:
        t = session.rounds[i].tokens[j]
        assert t.unjudged_p == live.rounds[i].tokens[j].unjudged_p
        assert t.unjudged_top_p == () and t.unjudged_p_rest is None
    assert check_session(session) == []


# ---------------------------------------------------------------------------------- format


def test_a_1_2_trace_round_trips_and_is_valid(live, tmp_path, capsys):
    assert SCHEMA == "specviz.trace/1.10"  # 1.3 to 1.10 added optional fields and values only
    path = tmp_path / "live.jsonl"
    save(live, path)
    back = load(path)
    assert back.warnings == []
    assert [back.details(i) for i in range(len(back.rounds))] == live.rounds
    assert check_session(back) == [] and check_session(back, top_lists=False) == []
    assert main(["inspect", str(path)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_a_1_1_reader_reads_a_1_2_trace(live):
    """What makes a 1.2 trace readable by 1.1 (specviz of 2026-12-01, checked by hand: it
    loads with a "newer minor version" warning, and inspect says valid): its discarded
    tokens keep 1.1's table (no p, no p_rest, null p in `top`), and only fields 1.1 does not
    know are added, which it ignores. Without them the lines are a valid 1.1 trace."""
    lines = [orjson.loads(line) for line in session_lines(live)]
    seen = 0
    for obj in lines[1:]:
        for token in obj["tokens"]:
            if token["status"] == "discarded":
                assert "p" not in token and "p_rest" not in token
                assert all(entry[1] is None for entry in token["top"])
                assert set(UNJUDGED) <= set(token)
                seen += 1
            else:
                assert not set(UNJUDGED) & set(token)
    assert seen
    lines[0]["schema"] = "specviz.trace/1.1"
    old = parse_lines([orjson.dumps(without_unjudged(obj)) for obj in lines])
    assert old.warnings == [] and check_session(old) == []
    assert all(t.unjudged_p is None for r in old.rounds for t in r.tokens)


@pytest.mark.parametrize("schema", ["specviz.trace/1", "specviz.trace/1.1"])
def test_older_traces_read_as_before(live, schema):
    lines = [orjson.loads(line) for line in session_lines(live)]
    lines[0]["schema"] = schema
    back = parse_lines([orjson.dumps(without_unjudged(obj)) for obj in lines])
    assert back.warnings == [] and check_session(back) == []
    i, j = discarded(live)[0]
    rnd = back.details(i)
    bars = position_bars(rnd, position_of(rnd, j))
    assert bars.kind == "discarded" and not bars.p_never_judged
    assert set(bars.p) == {None}  # what a 1.1 trace shows: q alone


# ------------------------------------------------------------------------------ invariants

NAN, INF = math.nan, math.inf


def cases(live: Session) -> list[tuple[tuple[int, int], dict, str]]:
    """(token, changes, the field refused) for each invariant."""
    d = discarded(live)[0]
    t = live.rounds[d[0]].tokens[d[1]]
    top_p = list(t.unjudged_top_p)
    other = next(k for k, e in enumerate(t.top) if e[0] != t.id and k > 0)
    unsorted = top_p.copy()
    unsorted[other] = 1.0  # more likely than the entry before it
    found = [
        (first(live, "accepted"), {"unjudged_p": 0.1}, "unjudged_p"),
        (first(live, "rejected"), {"unjudged_p_rest": 0.1}, "unjudged_p_rest"),
        (first(live, "resampled"), {"unjudged_top_p": (0.1,) * 20}, "unjudged_top_p"),
        (first(live, "bonus"), {"unjudged_p": 0.1}, "unjudged_p"),
        (d, {"unjudged_p": 1.5}, "unjudged_p"),
        (d, {"unjudged_p": -0.1}, "unjudged_p"),
        (d, {"unjudged_p": NAN}, "unjudged_p"),
        (d, {"unjudged_p": INF}, "unjudged_p"),
        (d, {"unjudged_p_rest": NAN}, "unjudged_p_rest"),
        (d, {"unjudged_top_p": tuple(top_p[:-1])}, "unjudged_top_p"),
        (d, {"unjudged_top_p": (*top_p[:-1], 2.0)}, f"unjudged_top_p[{len(top_p) - 1}]"),
        (d, {"unjudged_top_p": (*top_p[:-1], NAN)}, f"unjudged_top_p[{len(top_p) - 1}]"),
        (d, {"unjudged_top_p": (*top_p[:-1], -INF)}, f"unjudged_top_p[{len(top_p) - 1}]"),
        (d, {"unjudged_top_p": tuple(unsorted)}, f"top[{other}]"),
        (d, {"unjudged_p": None}, "unjudged_top_p"),
        (d, {"unjudged_top_p": ()}, "unjudged_p_rest"),
        (d, {"p": t.unjudged_p}, "p"),  # issue 14's table: p is never on a discarded token
        (d, {"top": ((t.top[0][0], 0.5, t.top[0][2]), *t.top[1:])}, "top[0]"),
    ]
    # The token's own entry in `top` is its unjudged_p (a drafted token is usually in it).
    i, j, k = next(
        (i, j, k)
        for i, j in discarded(live)
        for k, e in enumerate(live.rounds[i].tokens[j].top)
        if e[0] == live.rounds[i].tokens[j].id
    )
    wrong = list(live.rounds[i].tokens[j].unjudged_top_p)
    wrong[k] *= 0.999
    found.append(((i, j), {"unjudged_top_p": tuple(wrong)}, f"unjudged_top_p[{k}]"))
    # a bad unjudged_p of a token in its own `top` is named once, as itself
    found += [((i, j), {"unjudged_p": bad}, "unjudged_p") for bad in (NAN, 1.5)]
    return found


def finite(changes: dict) -> bool:
    """Whether specviz writes these values as they are (it writes NaN and infinities null)."""
    values = [v for value in changes.values() for v in (value if type(value) is tuple else [value])]
    return all(math.isfinite(v) for v in values if type(v) is float)


def test_each_invariant_is_refused_with_line_and_field(live, tmp_path):
    for n, (at, changes, field) in enumerate(cases(live)):
        bad = edit(live, at, **changes)
        expected = (at[0] + 2, f"tokens[{at[1]}].{field}")
        assert [(p.line, p.field) for p in check_session(bad)] == [expected], (changes, field)
        if n % 3 == 0 and finite(changes):  # and read from a file, as inspect reads it
            path = tmp_path / f"bad{n}.jsonl"
            save(bad, path)
            found = check_session(load(path))
            assert [(p.line, p.field) for p in found] == [expected], (changes, field)


@pytest.mark.parametrize("value", ['"x"', "[null]", "[true]", "[[0.1]]", '["0.1"]', "{}"])
def test_a_malformed_unjudged_top_p_is_named(live, tmp_path, capsys, value):
    i, j = discarded(live)[0]
    lines = list(session_lines(live))
    obj = json.loads(lines[i + 1])
    obj["tokens"][j]["unjudged_top_p"] = "@"
    lines[i + 1] = json.dumps(obj, separators=(",", ":")).replace('"@"', value)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError) as info:  # at load, or when its lists are parsed
        load(path).details(i)
    assert (info.value.line, info.value.field_name) == (i + 2, f"tokens[{j}].unjudged_top_p")
    assert main(["inspect", str(path)]) == 2
    assert f"line {i + 2}: field 'tokens[{j}].unjudged_top_p'" in capsys.readouterr().err


def test_integers_in_unjudged_top_p_are_numbers(live):
    i, j = discarded(live)[0]
    lines = [orjson.loads(line) for line in session_lines(live)]
    token = lines[i + 1]["tokens"][j]
    token["unjudged_top_p"] = [1] + [0] * (len(token["top"]) - 1)
    token["top"] = [[e[0], None, 0.0 if k else e[2]] for k, e in enumerate(token["top"])]
    rnd = parse_lines([orjson.dumps(o) for o in lines]).details(i)
    assert rnd.tokens[j].unjudged_top_p[:2] == (1.0, 0.0)
    assert type(rnd.tokens[j].unjudged_top_p[0]) is float


# ---------------------------------------------------------------------------------- served


def test_a_served_round_carries_them_bit_for_bit(pair, live):
    from specviz.remote.client import RemoteEngine
    from specviz.remote.server import Server

    server = Server(pair, "t0ken", port=0, log=lambda _: None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with RemoteEngine(f"127.0.0.1:{server.port}", "t0ken") as remote:
            remote.start(PROMPT, SETTINGS, calibrate=False)
            got = list(remote.run())
    finally:
        server.stop()
        thread.join(timeout=10)
        server.close()
    assert [wire(r) for r in got] == [wire(r) for r in live.rounds]
    assert any(t.unjudged_top_p for r in got for t in r.tokens)
