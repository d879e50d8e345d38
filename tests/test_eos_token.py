"""The header's eos_token_id (schema 1.1, optional, issue 14): written by the engine from the
tokenizer, read back, and checked exactly: finish_reason "eos" ends on that id, and no other
emitted token is that id. Without it (a 1.0 trace) the check stays the approximate one."""

from __future__ import annotations

import dataclasses
import json

import pytest

from specviz.cli.main import main
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.trace.check_session import check_session
from specviz.core.trace.files import load, save
from specviz.core.trace.records import Settings, TraceError
from specviz.core.trace.serialize import header_to_json
from specviz.core.trace.session import Session
from tests.fixtures import EOS, synthetic_session


def with_eos(session: Session, eos: int | None) -> Session:
    return Session(dataclasses.replace(session.header, eos_token_id=eos), session.rounds)


def replace_token(session: Session, index: int, j: int, **fields) -> Session:
    rounds = list(session.rounds)
    rnd = rounds[index]
    tokens = list(rnd.tokens)
    tokens[j] = dataclasses.replace(tokens[j], **fields)
    rounds[index] = dataclasses.replace(rnd, tokens=tuple(tokens))
    return Session(session.header, rounds)


def test_engine_writes_the_tokenizer_eos_and_it_reads_back(pair, tmp_path):
    engine = SpeculativeEngine(pair, Settings(k=3, seed=2, max_new_tokens=20))
    session = Session(engine.prefill("the cat", calibrate=False))
    assert session.header.eos_token_id == pair.eos_token_id is not None
    for rnd in engine.run():
        session.append(rnd)
    assert check_session(session) == []
    save(session, tmp_path / "t.jsonl")
    first = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])
    assert first["eos_token_id"] == pair.eos_token_id
    assert load(tmp_path / "t.jsonl").header.eos_token_id == pair.eos_token_id


def test_a_header_without_it_reads_as_none(tmp_path):
    session = synthetic_session(n_rounds=3)
    save(session, tmp_path / "t.jsonl")
    assert "eos_token_id" not in (tmp_path / "t.jsonl").read_text().splitlines()[0]
    assert load(tmp_path / "t.jsonl").header.eos_token_id is None


def test_eos_finish_on_the_header_id_is_valid():
    assert check_session(with_eos(synthetic_session(n_rounds=5, eos_last=True), EOS)) == []


def test_eos_finish_on_another_token_is_refused():
    session = with_eos(synthetic_session(n_rounds=5, eos_last=True), EOS + 7)
    problems = check_session(session)
    assert [(p.line, p.field) for p in problems] == [(6, "tokens[3].id")]
    assert "end-of-text token 7" in problems[0].message
    # Without the header's id only the approximate check runs: the same trace reads as valid.
    assert check_session(with_eos(session, None)) == []


def test_an_earlier_emitted_eos_is_refused():
    session = synthetic_session(n_rounds=5, eos_last=True)
    rnd = session.rounds[1]
    j = next(j for j, t in enumerate(rnd.tokens) if t.status in ("accepted", "resampled", "bonus"))
    session = replace_token(session, 1, j, id=EOS)
    problems = check_session(with_eos(session, EOS))
    assert any(p.line == 3 and p.field == f"tokens[{j}].id" for p in problems), problems
    assert "did not end there" in str(problems[0])
    # A discarded draft may be the end-of-text token: it was never emitted.
    discarded = next(
        (i, j) for i, r in enumerate(session.rounds[:-1]) for j, t in enumerate(r.tokens)
        if t.status == "discarded"
    )  # fmt: skip
    clean = replace_token(synthetic_session(n_rounds=5, eos_last=True), *discarded, id=EOS)
    assert check_session(with_eos(clean, EOS)) == []


@pytest.mark.parametrize("value,message", [('"0"', "expected an integer"), ("-1", "not a token")])
def test_a_bad_header_id_is_named(tmp_path, capsys, value, message):
    session = synthetic_session(n_rounds=2)
    obj = header_to_json(session.header)
    path = tmp_path / "t.jsonl"
    save(session, path)
    lines = path.read_text().splitlines()
    lines[0] = json.dumps(obj)[:-1] + f', "eos_token_id": {value}}}'
    path.write_text("\n".join(lines) + "\n")
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert "'eos_token_id'" in err and message in err and "Traceback" not in err
    if value == '"0"':
        with pytest.raises(TraceError):
            load(path)


def test_a_session_that_ignores_eos_may_emit_it_but_not_end_on_it():
    session = synthetic_session(n_rounds=5)
    settings = dataclasses.replace(session.header.settings, ignore_eos=True)
    header = dataclasses.replace(session.header, settings=settings, eos_token_id=EOS)
    rounds = [dataclasses.replace(r, settings=settings) for r in session.rounds]
    rnd = rounds[1]
    j = next(j for j, t in enumerate(rnd.tokens) if t.status in ("accepted", "resampled", "bonus"))
    ignoring = replace_token(Session(header, rounds), 1, j, id=EOS)
    assert check_session(ignoring) == []
    ended = Session(header, [*rounds[:-1], dataclasses.replace(rounds[-1], finish_reason="eos")])
    problems = check_session(ended)
    assert any("ignores end-of-text" in p.message for p in problems), problems
