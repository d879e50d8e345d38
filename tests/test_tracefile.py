"""Trace files: a live session reads back identical; each kind of bad input gives a TraceError
naming the line (and the field); a failed write leaves the old file as it was."""

from __future__ import annotations

import dataclasses
import json
import os
import random

import numpy as np
import orjson
import pytest

from specviz.cli.main import main
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.metrics.position_bars import position_bars, positions
from specviz.core.trace import files as tracefile
from specviz.core.trace.check_session import check_session
from specviz.core.trace.files import load, parse_lines, save, session_lines, write_atomic
from specviz.core.trace.records import SCHEMA_MINOR, Settings, TraceError
from specviz.core.trace.round_lines import without_top_lists
from specviz.core.trace.serialize import dumps
from specviz.core.trace.session import Session
from tests.fixtures import all_details, synthetic_session


@pytest.fixture(scope="module")
def live(pair) -> Session:
    engine = SpeculativeEngine(pair, Settings(k=4, seed=5, max_new_tokens=40, top_n=20))
    session = Session(engine.prefill("In the beginning God", calibrate=True))
    for rnd in engine.run():
        assert session.append(rnd)
    return session


def write(path, lines: list[str], end: str = "\n") -> None:
    path.write_text("\n".join(lines) + end, encoding="utf-8")


def lines_of(session: Session) -> list[str]:
    return list(session_lines(session))


def test_live_session_round_trip(live, tmp_path):
    path = tmp_path / "live.jsonl"
    save(live, path)
    back = load(path)
    assert back.header == live.header
    assert all_details(back) == live.rounds  # every record, every float, bit for bit
    assert back.warnings == [] and back.text == live.text and back.finished
    assert check_session(back) == []
    again = tmp_path / "again.jsonl"
    save(back, again)
    assert again.read_bytes() == path.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.jsonl", "live.jsonl"]


@pytest.mark.parametrize(
    "settings",
    [
        Settings(k=3, temperature=0, seed=1, max_new_tokens=30),
        Settings(k=5, temperature=0.7, top_k=20, top_p=0.9, seed=2, max_new_tokens=30),
        Settings(k=1, temperature=1.5, seed=3, max_new_tokens=20, top_n=3),
    ],
)
def test_live_sessions_have_no_problems(pair, settings):
    engine = SpeculativeEngine(pair, settings)
    session = Session(engine.prefill("A fool and his", calibrate=False))
    for rnd in engine.run():
        session.append(rnd)
    assert check_session(parse_lines(session_lines(session))) == []


def test_not_json(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_text("round 0: accepted 3 of 4\n", encoding="utf-8")
    with pytest.raises(TraceError, match=r"^line 1: not valid JSON .*one JSON object per line"):
        load(path)


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_empty_file(tmp_path, content):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=r"^line 1: the file is empty") as info:
        load(path)
    assert info.value.line == 1


def test_binary_file(tmp_path):
    path = tmp_path / "picture.jsonl"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)) * 4)
    with pytest.raises(TraceError, match=r"^line 1: .*binary") as info:
        load(path)
    assert info.value.line == 1


def test_not_utf8_text(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes('{"type": "session", "prompt": "café"}\n'.encode("latin-1"))
    with pytest.raises(TraceError, match=r"^line 1: not UTF-8 text"):
        load(path)


def test_truncated_last_line_loads_complete_rounds_and_warns(tmp_path):
    lines = lines_of(synthetic_session(6))
    path = tmp_path / "cut.jsonl"
    write(path, [*lines[:-1], lines[-1][: len(lines[-1]) // 2]], end="")
    session = load(path)
    assert len(session.rounds) == 5
    assert all_details(session) == synthetic_session(6).rounds[:5]
    assert len(session.warnings) == 1
    assert session.warnings[0].startswith("line 7: not valid JSON")
    assert "cut-off last line" in session.warnings[0] and "5 complete rounds" in session.warnings[0]


def test_truncated_inside_a_multibyte_character(tmp_path):
    lines = lines_of(synthetic_session(3))
    data = ("\n".join(lines) + "\n").encode("utf-8")
    cut = data.rindex(" é".encode()) + 2  # between the two bytes of "é"
    path = tmp_path / "cut.jsonl"
    path.write_bytes(data[:cut])
    session = load(path)
    assert len(session.rounds) == data[:cut].count(b"\n") - 1
    assert "not UTF-8" in session.warnings[0]


def test_crash_zeros_at_the_end_are_a_cut_off_line(tmp_path):
    lines = lines_of(synthetic_session(3))
    path = tmp_path / "zeros.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\0" * 512)
    session = load(path)
    assert len(session.rounds) == 3 and "NUL" in session.warnings[0]


def test_truncated_middle_line_is_an_error(tmp_path):
    lines = lines_of(synthetic_session(6))
    lines[3] = lines[3][:100]
    path = tmp_path / "broken.jsonl"
    write(path, lines)
    with pytest.raises(TraceError, match=r"^line 4: not valid JSON") as info:
        load(path)
    assert info.value.line == 4


def test_unknown_schema_major_is_refused(tmp_path):
    lines = lines_of(synthetic_session(2))
    header = json.loads(lines[0])
    header["schema"] = "specviz.trace/2"
    path = tmp_path / "future.jsonl"
    write(path, [json.dumps(header), *lines[1:]])
    with pytest.raises(TraceError) as info:
        load(path)
    message = str(info.value)
    assert message.startswith("line 1: field 'schema': schema 'specviz.trace/2' is not supported")
    assert "specviz.trace/1" in message and "newer specviz" in message
    assert (info.value.line, info.value.field_name) == (1, "schema")


def test_not_a_specviz_trace(tmp_path):
    path = tmp_path / "other.jsonl"
    write(path, ['{"event": "start", "user": 3}', '{"event": "stop"}'])
    with pytest.raises(TraceError, match=r"^line 1: the first line must be the session header"):
        load(path)


def test_newer_minor_version_fields_are_kept_or_ignored(tmp_path):
    session = synthetic_session(4)
    lines = [json.loads(line) for line in lines_of(session)]
    newer = f"specviz.trace/1.{SCHEMA_MINOR + 1}"  # a minor version after this specviz's
    lines[0]["schema"] = newer
    lines[0]["gpu"] = {"name": "H200"}  # unknown header field: kept
    lines[0]["settings"]["draft_temperature"] = 0.5  # unknown setting: ignored
    lines[1]["energy_j"] = 1.5  # unknown round field: ignored
    lines[1]["tokens"][0]["logit"] = 3.25  # unknown token field: ignored
    lines.insert(2, {"type": "annotation", "round": 0, "note": "interesting"})  # unknown record
    path = tmp_path / "newer.jsonl"
    write(path, [json.dumps(obj) for obj in lines])
    back = load(path)
    assert all_details(back) == session.rounds
    assert back.header.extra == {"gpu": {"name": "H200"}}
    assert back.header.settings == session.header.settings
    assert any(newer in w for w in back.warnings)
    assert any("'annotation'" in w for w in back.warnings)
    resaved = tmp_path / "resaved.jsonl"
    save(back, resaved)
    assert json.loads(resaved.read_text().splitlines()[0])["gpu"] == {"name": "H200"}


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda r: r["tokens"][1].update(p="high"),
            "line 3: field 'tokens[1].p': expected a number",
        ),
        (lambda r: r["tokens"][0].pop("status"), "line 3: field 'tokens[0].status': missing"),
        (
            lambda r: r["tokens"][0].update(status="kept"),
            "field 'tokens[0].status': unknown status",
        ),
        (lambda r: r.pop("n_drafted"), "line 3: field 'n_drafted': missing"),
        (lambda r: r.update(index=7), "line 3: field 'index': expected round 1, got 7"),
        (lambda r: r.update(draft_ms=True), "line 3: field 'draft_ms': expected a number"),
        (lambda r: r["tokens"][0].update(top=[[1, 0.5]]), "field 'tokens[0].top': expected a list"),
        (lambda r: r["tokens"][0].update(top=[["x", 0.5, 0.1]]), "field 'tokens[0].top': expected"),
        (lambda r: r["tokens"][0].update(top=[[]]), "field 'tokens[0].top': expected a list"),
        (lambda r: r["tokens"][0].update(top="abc"), "field 'tokens[0].top': expected a list"),
        (lambda r: r["tokens"][0].update(top=[[1, 0.5, "x"]]), "field 'tokens[0].top': expected"),
        (lambda r: r["tokens"][0].update(top_text=[1, 2]), "field 'tokens[0].top_text'"),
        (lambda r: r.pop("type"), "line 3: field 'type': missing"),
        (lambda r: r.update(type="session"), "line 3: field 'type': a second session header"),
    ],
)
def test_structure_errors_name_line_and_field(tmp_path, edit, expected):
    lines = [json.loads(line) for line in lines_of(synthetic_session(3))]
    edit(lines[2])
    path = tmp_path / "bad.jsonl"
    write(path, [json.dumps(obj) for obj in lines])
    with pytest.raises(TraceError) as info:
        load(path)
    assert expected in str(info.value)
    assert info.value.line == 3


def test_a_line_that_is_not_an_object(tmp_path):
    lines = lines_of(synthetic_session(2))
    path = tmp_path / "array.jsonl"
    write(path, [lines[0], "[1, 2, 3]", *lines[1:]])
    with pytest.raises(TraceError, match=r"^line 2: expected a JSON object, got list"):
        load(path)


def test_parse_lines_accepts_str_and_bytes():
    lines = lines_of(synthetic_session(3))
    from_str = parse_lines(lines)
    from_bytes = parse_lines(line.encode() for line in lines)
    assert all_details(from_str) == all_details(from_bytes) == synthetic_session(3).rounds


# ---------------------------------------------------------------------------- atomic write


def leftovers(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_failure_mid_write_leaves_the_old_file(tmp_path):
    path = tmp_path / "trace.jsonl"
    save(synthetic_session(3), path)
    before = path.read_bytes()

    def lines_then_crash():
        yield from lines_of(synthetic_session(50, seed=9))[:20]
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_atomic(path, lines_then_crash())
    assert path.read_bytes() == before
    assert leftovers(tmp_path) == []


def test_failed_rename_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "trace.jsonl"
    save(synthetic_session(3), path)
    before = path.read_bytes()

    def failing_replace(src, dst):
        assert os.path.exists(src)  # the new content was complete on disk
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tracefile.os, "replace", failing_replace)
    with pytest.raises(PermissionError):
        save(synthetic_session(8, seed=2), path)
    assert path.read_bytes() == before
    assert leftovers(tmp_path) == []
    assert all_details(load(path)) == synthetic_session(3).rounds


def test_interrupt_mid_write_leaves_no_file(tmp_path):
    path = tmp_path / "new.jsonl"

    def lines_then_interrupt():
        yield "{}"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, lines_then_interrupt())
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_gives_normal_permissions(tmp_path):
    import os
    import stat

    from specviz.core.trace.files import write_atomic

    new = tmp_path / "new.jsonl"
    umask = os.umask(0o022)
    try:
        write_atomic(new, ["{}"])
    finally:
        os.umask(umask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o644
    new.chmod(0o640)
    write_atomic(new, ["{}", "{}"])  # replacing keeps the file's own mode
    assert stat.S_IMODE(new.stat().st_mode) == 0o640


# ------------------------------------------------------------------ top-N lists, deferred

TOP_LIST_KEYS = ("top", "top_text", "residual_top", "residual_text", "unjudged_top_p")


def without_keys(obj: dict) -> dict:
    """The round with its tokens' top-N lists removed, except a list that is the first field
    of its token (there is no ',"' before it to find: it is parsed at load instead)."""
    for token in obj.get("tokens", []):
        first = next(iter(token), None)
        for key in TOP_LIST_KEYS:
            if key in token and key != first:
                del token[key]
    return obj


def test_loaded_rounds_parse_their_top_lists_when_asked(live, tmp_path):
    path = tmp_path / "live.jsonl"
    save(live, path)
    back = load(path)
    for i, (loaded, written) in enumerate(zip(back.rounds, live.rounds, strict=True)):
        assert back.line_number(i) == written.index + 2 and back.lines.text(i) is not None
        assert all(t.top == t.top_text == () for t in loaded.tokens)  # not parsed at load
        light = [dataclasses.replace(t, **dict.fromkeys(TOP_LIST_KEYS, ())) for t in written.tokens]
        assert list(loaded.tokens) == light  # every other field parsed at load
        full = back.details(i)
        assert full == written  # plain values: equal field by field
        assert back.rounds[i] is loaded  # nothing cached in the session
        for position in range(positions(written)):
            assert position_bars(full, position) == position_bars(written, position)


# JSON strings that look like the ends of lists, keys or objects
TRICKY = ['"]', "\\", '\\"]', '],"top":[[1,2,3]]', ',"top_text":["x"]', "}", "]]", "日本", "😀"]


def random_text(rng: random.Random) -> str:
    if rng.random() < 0.3:
        return rng.choice(TRICKY)
    return "".join(rng.choice('"\\[]{},: a日😀\n\t') for _ in range(rng.randrange(0, 6)))


def random_round_line(rng: random.Random) -> dict:
    def number():
        return rng.choice([None, 0.0, 1.0, rng.random(), 1e-9, 12345678.5])

    tokens = []
    for _ in range(rng.randrange(0, 4)):
        token = {"id": rng.randrange(100), "text": random_text(rng), "status": "accepted"}
        n = rng.randrange(0, 4)
        if rng.random() < 0.8:
            token["top"] = [[rng.randrange(100), number(), number()] for _ in range(n)]
        if rng.random() < 0.8:
            token["top_text"] = [random_text(rng) for _ in range(n)]
        if rng.random() < 0.3:
            token["residual_top"] = [[rng.randrange(100), number()] for _ in range(n)]
            token["residual_text"] = [random_text(rng) for _ in range(n)]
        if rng.random() < 0.3:  # schema 1.2: a flat list of numbers
            token["unjudged_top_p"] = [rng.choice([0.0, 1, rng.random(), 1e-9]) for _ in range(n)]
        if rng.random() < 0.3:
            token["later"] = random_text(rng)  # a field after the lists (a newer version)
        keys = list(token)
        if rng.random() < 0.3:
            rng.shuffle(keys)  # a list first in its object is not cut, and still read
        tokens.append({key: token[key] for key in keys})
    return {"type": "round", "index": 0, "tokens": tokens, "note": random_text(rng)}


def test_cutting_top_lists_keeps_everything_else():
    rng = random.Random(0)
    cut_any = 0
    for _ in range(400):
        obj = random_round_line(rng)
        raw = dumps(obj).encode()
        light, cut = without_top_lists(raw)
        assert orjson.loads(light) == without_keys(json.loads(raw))
        assert cut == (light != raw)
        cut_any += cut
    assert cut_any > 300


def test_lists_written_by_other_tools_are_read_at_load(tmp_path):
    session = synthetic_session(3)
    path = tmp_path / "spaced.jsonl"
    write(path, [json.dumps(json.loads(line)) for line in lines_of(session)])  # ", " and ": "
    back = load(path)
    assert [back.lines.text(i) for i in range(3)] == [None] * 3  # nothing left to parse
    assert back.rounds == session.rounds and back.rounds[0].tokens[0].top


@pytest.mark.parametrize(
    "top", [[[1, 0.5]], [[1, 0.5, True]], [[]], [[1, [0.5], 0.1]], [[1, 0.5, 0.1, 3]]]
)
def test_malformed_top_lists_are_named_when_parsed(tmp_path, capsys, top):
    lines = [json.loads(line) for line in lines_of(synthetic_session(3))]
    lines[2]["tokens"][0]["top"] = top
    path = tmp_path / "bad.jsonl"
    write(path, [dumps(obj) for obj in lines])  # compact, as specviz writes
    session = load(path)  # the rest of the line is sound; the list is checked when parsed
    with pytest.raises(TraceError, match="expected") as info:
        session.details(1)
    assert (info.value.line, info.value.field_name) == (3, "tokens[0].top")
    problems = check_session(session)
    assert [(p.line, p.field) for p in problems] == [(3, "tokens[0].top")]
    assert check_session(session, top_lists=False) == []  # what the app checks on open
    assert main(["inspect", str(path)]) == 2
    assert "line 3: field 'tokens[0].top'" in capsys.readouterr().err


def test_a_line_cut_off_anywhere_in_its_lists_is_a_cut_off_line():
    lines = [line.encode() for line in lines_of(synthetic_session(3, top_n=3))[:4]]
    last = lines[3]
    assert b',"top":[' in last and b',"top_text":[' in last
    for cut in range(1, len(last) - 1):
        session = parse_lines([*lines[:3], last[:cut]])
        assert len(session.rounds) == 2, cut
        assert "cut-off last line" in session.warnings[0], cut


def test_a_loaded_trace_is_written_back_as_it_was_read(live, tmp_path):
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    save(live, first)
    lines = first.read_text(encoding="utf-8").splitlines()
    obj = json.loads(lines[2])
    obj["from_a_newer_version"] = {"kept": True}
    lines[2] = dumps(obj)
    write(first, lines)
    save(load(first), second)  # no line re-parsed: the unknown field is kept
    assert second.read_bytes() == first.read_bytes()
    assert all_details(load(second)) == live.rounds


def test_lines_take_any_number_json_took():
    class Ms(float):
        pass

    obj = {"a": np.float64(0.25), "b": np.float32(0.5), "c": np.int64(3), "d": Ms(1.5),
           "e": float("nan"), "f": np.float64("inf"), "g": (1, 2.5), "h": True}  # fmt: skip
    assert json.loads(dumps(obj)) == {
        "a": 0.25, "b": 0.5, "c": 3, "d": 1.5, "e": None, "f": None, "g": [1, 2.5], "h": True
    }  # fmt: skip
    with pytest.raises(TypeError):
        dumps({"x": object()})
