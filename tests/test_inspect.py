"""`specviz inspect`: a summary of any trace, exit 0 when valid, 2 with the line and the
field when not; run in-process through specviz.cli.main.main."""

from __future__ import annotations

import dataclasses
import json

import pytest

from specviz.cli.main import main
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.trace.files import save, session_lines
from specviz.core.trace.records import Settings
from specviz.core.trace.session import Session
from tests.fixtures import synthetic_session


@pytest.fixture(scope="module")
def live_trace(pair, tmp_path_factory):
    engine = SpeculativeEngine(pair, Settings(k=3, seed=11, max_new_tokens=30))
    session = Session(engine.prefill("The quick brown fox", calibrate=True))
    for rnd in engine.run():
        session.append(rnd)
    path = tmp_path_factory.mktemp("inspect") / "live.jsonl"
    save(session, path)
    return path, session


def inspect(capsys, *args) -> tuple[int, str, str]:
    code = main(["inspect", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_valid_trace_summary(live_trace, capsys):
    path, session = live_trace
    code, out, err = inspect(capsys, path)
    assert code == 0, err
    assert err == ""
    header = session.header
    for text in (
        header.target.name,
        header.draft.name,
        f"K {header.settings.k}",
        f"rounds      {len(session.rounds)}",
        "(accepted/judged drafts)",
        "acceptance by position",
        "speedup     measured",
        "valid       yes",
    ):
        assert text in out, text
    positions = out.split("acceptance by position")[1].splitlines()[1]
    assert positions.split()[0] == "1:" and "3:" in positions


def test_json_output(live_trace, capsys):
    path, session = live_trace
    code, out, err = inspect(capsys, path, "--json")
    assert code == 0, err
    report = json.loads(out)  # one object
    assert report["valid"] is True and report["problems"] == []
    assert report["file"] == str(path)
    assert report["rounds"] == len(session.rounds)
    assert report["tokens"] == sum(r.n_emitted for r in session.rounds)
    assert report["target"]["name"] == session.header.target.name
    assert report["settings"]["k"] == 3
    assert len(report["acceptance_by_position"]) <= 3
    assert sum(report["accepted_lengths"]) + report["undrafted"] == len(session.rounds)
    # how noisy this machine is decides the status, not the test: each says what it means
    status = report["speedup_status"]
    assert status in ("ok", "noisy", "impossible") and report["speedup_predicted"] is not None
    assert (report["speedup_measured"] is not None) == (status == "ok")
    assert report["speedup_ci"][0] <= report["speedup_measured_raw"] <= report["speedup_ci"][1]


def write_edited(tmp_path, edit, rounds: int = 8) -> str:
    session = synthetic_session(rounds, seed=6)
    session = edit(session)
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join(session_lines(session)) + "\n", encoding="utf-8")
    return str(path)


def replace_token(session, i, j, **changes):
    rounds = list(session.rounds)
    tokens = list(rounds[i].tokens)
    tokens[j] = dataclasses.replace(tokens[j], **changes)
    rounds[i] = dataclasses.replace(rounds[i], tokens=tuple(tokens))
    return Session(session.header, rounds)


def test_contradicting_accept_prob_is_invalid(tmp_path, capsys):
    path = write_edited(tmp_path, lambda s: replace_token(s, 2, 0, accept_prob=0.123))
    code, out, err = inspect(capsys, path)
    assert code == 2
    assert "is not a valid trace: 1 problem(s)" in err
    assert "line 4: field 'tokens[0].accept_prob': 0.123, but min(1, p/q)" in err
    assert "valid       NO" in out  # the summary is still shown


def test_accepted_with_u_above_accept_prob_is_invalid(tmp_path, capsys):
    session = synthetic_session(8, seed=6)
    i, j = next(
        (r.index, j)
        for r in session.rounds
        for j, t in enumerate(r.tokens)
        if t.status == "accepted" and t.accept_prob < 1
    )
    t = session.rounds[i].tokens[j]
    path = write_edited(tmp_path, lambda s: replace_token(s, i, j, u=(t.accept_prob + 1) / 2))
    code, out, err = inspect(capsys, path, "--json")
    assert code == 2
    report = json.loads(out)
    assert report["valid"] is False
    assert report["problems"][0]["line"] == i + 2
    assert report["problems"][0]["field"] == f"tokens[{j}].u"
    assert f"line {i + 2}: field 'tokens[{j}].u'" in err


def test_many_problems_are_capped(tmp_path, capsys):
    def all_wrong(session):
        rounds = [dataclasses.replace(r, context_len=1) for r in session.rounds]
        return Session(session.header, rounds)

    path = write_edited(tmp_path, all_wrong, rounds=30)
    code, _, err = inspect(capsys, path)
    assert code == 2 and "30 problem(s)" in err
    assert err.count("field 'context_len'") == 20 and "... and 10 more (--json lists them)" in err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"this is not json\n", "line 1: not valid JSON"),
        (b"", "line 1: the file is empty"),
        (b"\x00\x01\x02binary", "line 1: "),
    ],
)
def test_unreadable_traces(tmp_path, capsys, content, expected):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    code, out, err = inspect(capsys, path)
    assert code == 2
    assert err.startswith("specviz: error: ") and expected in err
    assert out == ""
    code, out, _ = inspect(capsys, path, "--json")
    report = json.loads(out)
    assert code == 2 and report["valid"] is False and report["problems"][0]["line"] == 1


def test_structure_error_names_line_and_field(tmp_path, capsys):
    lines = list(session_lines(synthetic_session(4)))
    obj = json.loads(lines[3])
    obj["tokens"][0]["p"] = "0.5"
    lines[3] = json.dumps(obj)
    path = tmp_path / "typed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, _, err = inspect(capsys, path)
    assert code == 2 and "line 4: field 'tokens[0].p': expected a number" in err


def test_cut_off_trace_is_valid_with_a_warning(tmp_path, capsys):
    lines = list(session_lines(synthetic_session(5)))
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(lines)[:-40])
    code, out, err = inspect(capsys, path)
    assert code == 0, err
    assert "warning     line 6: not valid JSON" in out and "rounds      4" in out


def test_missing_file(tmp_path, capsys):
    code, _, err = inspect(capsys, tmp_path / "nowhere.jsonl")
    assert code == 2 and "cannot read" in err


def test_progress_on_a_terminal(tmp_path, capsys, monkeypatch):
    path = tmp_path / "t.jsonl"
    save(synthetic_session(300), path)
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    code, out, err = inspect(capsys, path)
    assert code == 0 and "rounds      300" in out
    # one pass: each round is read, checked and let go
    assert "reading and checking the trace:  50%" in err
    assert "reading and checking the trace: 100%" in err


def _no_constants(name: str):
    raise AssertionError(f"{name} in --json output: not strict JSON")


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ('"temperature": NaN', "temperature"),
        ('"top_p": Infinity', "top_p"),
        ('"temperature": -Infinity', "temperature"),
        ('"top_p": 1' + "0" * 400, "top_p"),  # reads as an infinite float
    ],
)
def test_json_is_strict_for_an_invalid_header(tmp_path, capsys, edit, field):
    lines = list(session_lines(synthetic_session(3)))
    header = json.loads(lines[0])
    header["settings"][field] = "@"
    lines[0] = json.dumps(header).replace(f'"{field}": "@"', edit)
    path = tmp_path / "nan.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = inspect(capsys, path, "--json")
    assert code == 2 and "line 1: field 'settings'" in err
    report = json.loads(out, parse_constant=_no_constants)
    assert report["valid"] is False and report["settings"][field] is None
    assert report["settings"]["k"] == 4  # the finite values are as they were


def test_a_long_dense_line_is_refused_before_it_is_parsed(tmp_path, capsys):
    """Issue 37: a 5 MB line of empty lists cost 26x its size to parse (each a Python list);
    such a line is refused, its size named, before parsing, and its reading costs about its
    size (issue 48: core.trace.line_cost)."""
    import tracemalloc

    from specviz.core.trace import files

    path = tmp_path / "dense.jsonl"
    path.write_text('{"type": "session", "x": [' + ",".join(["[]"] * 1_700_000) + "]}")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        with pytest.raises(files.TraceError, match="5.1 MB that would take more than 8") as caught:
            next(files.stream(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.line == 1 and peak < 3 * size
    assert main(["inspect", str(path)]) == 2
    assert "a line of 5.1 MB that would take more than" in capsys.readouterr().err
