"""Hostile and broken traces (issue 14, the trace side): `specviz inspect` answers every one
with exit 0 or 2 and a message naming the line and the field, never a traceback, in memory
and time bounded by the file whatever its numbers say; and what README.md's tables say each
field holds is checked."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from specviz.cli.main import main
from specviz.core.trace.check_session import check_session
from specviz.core.trace.files import load, session_lines
from specviz.core.trace.records import TraceError
from tests.fixtures import synthetic_session

BIG = 10**400  # a 400-digit number: json writes it as an integer literal


def trace_objects(n_rounds: int = 6, seed: int = 6) -> list[dict]:
    session = synthetic_session(n_rounds, seed=seed)
    return [json.loads(line) for line in session_lines(session)]


def write(tmp_path, objs: list[dict], name: str = "t.jsonl") -> str:
    path = tmp_path / name
    lines = [json.dumps(obj, separators=(",", ":"), ensure_ascii=False) for obj in objs]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def find(objs: list[dict], status: str) -> tuple[int, int] | None:
    """(line index, token index) of the first token with this status."""
    for i, obj in enumerate(objs[1:], start=1):
        for j, token in enumerate(obj["tokens"]):
            if token["status"] == status:
                return i, j
    return None


def inspect(capsys, path: str) -> tuple[int, str]:
    code = main(["inspect", path])
    return code, capsys.readouterr().err


def test_a_huge_n_accepted_stays_bounded_by_the_file(tmp_path, capsys):
    objs = trace_objects(3)
    objs[1]["n_accepted"] = 100_000_000
    path = write(tmp_path, objs)
    size = Path(path).stat().st_size
    inspect(capsys, write(tmp_path, trace_objects(3), "warm.jsonl"))  # imports first
    tracemalloc.start()
    try:
        code, err = inspect(capsys, path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 2 and "line 2: field 'n_accepted': 100000000, but" in err
    assert peak < 100 * size, (peak, size)  # a list of n_accepted entries was 800 MB


@pytest.mark.parametrize(
    ("where", "value", "field"),
    [
        ("token", {"p": BIG}, "tokens[0].p"),
        ("token", {"u": BIG}, "tokens[0].u"),
        ("round", {"verify_ms": BIG}, "verify_ms"),
        ("round", {"n_drafted": BIG}, "n_drafted"),
        ("round", {"n_accepted": -1}, "n_accepted"),
        ("round", {"index": BIG}, "index"),
        ("settings", {"top_p": BIG}, "settings"),
        ("header", {"baseline_ms_per_token": BIG}, "baseline_ms_per_token"),
        ("header", {"prompt_ids": [BIG]}, "prompt_ids"),
        ("model", {"vocab_size": BIG}, "target.vocab_size"),
    ],
)
def test_out_of_range_numbers_are_named(tmp_path, capsys, where, value, field):
    objs = trace_objects(3)
    target = {
        "token": objs[1]["tokens"][0],
        "round": objs[1],
        "settings": objs[0]["settings"],
        "header": objs[0],
        "model": objs[0]["target"],
    }[where]
    target.update(value)
    path = write(tmp_path, objs)
    try:
        problems = [(p.line, p.field) for p in check_session(load(path))]
    except TraceError as e:  # the reader's: "expected an integer, got inf"
        problems = [(e.line, e.field_name)]
    line = 1 if where in ("settings", "header", "model") else 2
    assert (line, field) in problems, problems
    code, err = inspect(capsys, path)
    assert code == 2 and f"line {line}: field '{field}'" in err


@pytest.mark.parametrize("literal", ["1e400", "-1e400", "Infinity", "NaN"])
def test_non_finite_times_are_refused(tmp_path, capsys, literal):
    objs = trace_objects(3)
    path = write(tmp_path, objs)
    text = Path(path).read_text(encoding="utf-8").splitlines()
    number = json.dumps(objs[2]["draft_ms"])
    text[2] = text[2].replace(f'"draft_ms":{number}', f'"draft_ms":{literal}')
    Path(path).write_text("\n".join(text) + "\n", encoding="utf-8")
    code, err = inspect(capsys, path)
    assert code == 2 and "line 3: field 'draft_ms'" in err


def edit_settings(objs, **changes):
    objs[2]["settings"] = {**objs[2]["settings"], **changes}


def edit_token(status: str, drop: tuple = (), **changes):
    def edit(objs):
        i, j = find(objs, status)
        token = objs[i]["tokens"][j]
        for name in drop:
            token.pop(name, None)
        token.update(changes)
        return i, j

    return edit


def top_n(objs, n):
    for obj in objs[1:]:
        obj["settings"]["top_n"] = n
    objs[0]["settings"]["top_n"] = n


def unsorted(objs):
    top = objs[1]["tokens"][0]["top"]
    top[0], top[-1] = top[-1], top[0]


def emitted_too_many(objs):
    for obj in [objs[0], *objs[1:]]:
        obj["settings"]["max_new_tokens"] = 3


def eos_repeats(objs):
    objs[-1]["finish_reason"] = "eos"
    last = objs[-1]["tokens"][-1]
    last["id"] = next(t["id"] for t in objs[1]["tokens"] if t["status"] in ("accepted", "bonus"))


def eos_after_a_rejection(objs):
    """The last round ends on its rejected and discarded drafts: nothing emitted last."""
    i = max(i for i, obj in enumerate(objs[1:], 1) if find([{}, obj], "rejected"))
    del objs[i + 1 :]
    objs[i]["finish_reason"] = "eos"
    objs[i]["tokens"].pop()  # the resampled token
    return i, None


# (edit, line, field): each contradicts README.md's tables
TABLES = {
    "round top_p 0": (lambda o: edit_settings(o, top_p=0.0), 3, "settings"),
    "round top_k -1": (lambda o: edit_settings(o, top_k=-1), 3, "settings"),
    "round seed changed": (lambda o: edit_settings(o, seed=99), 3, "settings.seed"),
    "unknown finish_reason": (lambda o: o[-1].update(finish_reason="tired"), 7, "finish_reason"),
    "p missing on bonus": (edit_token("bonus", drop=("p",)), None, "p"),
    "p missing on resampled": (edit_token("resampled", drop=("p",)), None, "p"),
    "no residual on resampled": (edit_token("resampled", drop=("residual",)), None, "residual"),
    "alpha missing on accepted": (edit_token("accepted", drop=("alpha",)), None, "alpha"),
    "q on a bonus token": (edit_token("bonus", q=0.5), None, "q"),
    "p on a discarded token": (edit_token("discarded", p=0.5), None, "p"),
    "accept_prob on resampled": (edit_token("resampled", accept_prob=0.5), None, "accept_prob"),
    "negative token id": (edit_token("accepted", id=-1), None, "id"),
    "token id >= vocab_size": (edit_token("bonus", id=50257), None, "id"),
    "more emitted than max_new_tokens": (emitted_too_many, 3, "tokens"),
    "eos token emitted before": (eos_repeats, 7, "finish_reason"),
    "eos without an emitted last token": (eos_after_a_rejection, None, "finish_reason"),
    "top longer than top_n": (lambda o: top_n(o, 5), 2, "tokens[0].top"),
    "top unsorted": (unsorted, 2, "tokens[0].top[1]"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(TABLES))
def test_the_tables_are_checked(tmp_path, capsys, case):
    edit, line, field = TABLES[case]
    objs = trace_objects()
    assert check_session(load(write(tmp_path, objs, "good.jsonl"))) == []
    where = edit(objs)
    if line is None:  # found by the edit: a token's field, or a round's
        i, j = where
        line, field = i + 1, field if j is None else f"tokens[{j}].{field}"
    path = write(tmp_path, objs)
    found = [(p.line, p.field) for p in check_session(load(path))]
    assert (line, field) in found, found
    code, err = inspect(capsys, path)
    assert code == 2 and f"line {line}: field '{field}'" in err


@pytest.mark.parametrize("line", [0, 1])
def test_a_lone_surrogate_is_not_text(tmp_path, line):
    """A \\ud800 escape reads into a str no terminal, file or widget can take."""
    objs = trace_objects(3)
    if line == 0:
        objs[0]["prompt"] = "\ud800 and more"
    else:
        objs[1]["tokens"][0]["text"] = "\udfff"
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(obj) for obj in objs) + "\n", encoding="utf-8")
    with pytest.raises(TraceError, match="lone UTF-16 surrogate") as info:
        load(path)
    assert info.value.line == line + 1


def test_a_summary_line_before_the_last_round_is_refused(tmp_path):
    from specviz.core.trace.files import load, session_lines
    from specviz.core.trace.records import TraceError
    from tests.fixtures import synthetic_session

    lines = list(session_lines(synthetic_session(3)))
    lines.insert(2, json.dumps({"type": "summary", "rounds": 1}))
    path = tmp_path / "early.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError, match="a round after the summary line"):
        load(path)


def test_a_round_k_off_the_constant_policy_is_named(pair):
    """Under the constant policy every round's K is the settings' K: a larger one is a
    contradiction the checks name (it was accepted)."""
    import dataclasses

    from specviz.core.engine.speculative import SpeculativeEngine
    from specviz.core.trace.check_session import check_session
    from specviz.core.trace.records import Settings
    from specviz.core.trace.session import Session

    engine = SpeculativeEngine(pair, Settings(k=3, seed=1, max_new_tokens=20))
    session = Session(engine.prefill("And the earth was", calibrate=False))
    for rnd in engine.run():
        session.append(rnd)
    assert check_session(session) == [] and {r.k for r in session.rounds} == {3}
    bad = dataclasses.replace(session.rounds[1], k=5)
    problems = check_session(Session(session.header, [session.rounds[0], bad, *session.rounds[2:]]))
    assert [p.field for p in problems] == ["k"] and "constant policy" in problems[0].message
