"""core.trace.check_session: each kind of contradiction is found, at the right line and field,
and consistent traces (synthetic here, live in test_tracefile.py) have none."""

from __future__ import annotations

import dataclasses

import pytest

from specviz.core.trace.check_session import Problem, check_session, expected_accept_prob
from specviz.core.trace.files import load, save
from specviz.core.trace.records import NUMBERS_BY_STATUS, Round, TokenEvent
from specviz.core.trace.session import Session
from tests.fixtures import synthetic_header, synthetic_rounds, synthetic_session


def first_round(session: Session, *statuses: str) -> int:
    """Index of the first round whose statuses start with these."""
    for rnd in session.rounds:
        if tuple(t.status for t in rnd.tokens[: len(statuses)]) == statuses:
            return rnd.index
    raise AssertionError(f"no round starting with {statuses}")


def edit_token(session: Session, index: int, j: int, **changes) -> Session:
    rnd = session.rounds[index]
    tokens = list(rnd.tokens)
    tokens[j] = dataclasses.replace(tokens[j], **changes)
    return edit_round(session, index, tokens=tuple(tokens))


def edit_round(session: Session, index: int, **changes) -> Session:
    rounds = list(session.rounds)
    rounds[index] = dataclasses.replace(rounds[index], **changes)
    return Session(session.header, rounds)


def where(problems: list[Problem]) -> list[tuple[int, str]]:
    return [(p.line, p.field) for p in problems]


@pytest.fixture(scope="module")
def session() -> Session:
    return synthetic_session(40, seed=1)


def test_consistent_trace_has_no_problems(session):
    assert check_session(session) == []


def test_accept_prob_not_min_1_p_over_q(session):
    i = first_round(session, "accepted")
    t = session.rounds[i].tokens[0]
    bad = edit_token(session, i, 0, accept_prob=t.accept_prob * 0.99)
    problems = check_session(bad)
    assert where(problems) == [(i + 2, "tokens[0].accept_prob")]
    assert "min(1, p/q)" in str(problems[0])
    assert str(problems[0]).startswith(f"line {i + 2}: field 'tokens[0].accept_prob': ")


def test_accept_prob_within_tolerance_is_fine(session):
    i = first_round(session, "accepted")
    t = session.rounds[i].tokens[0]
    assert check_session(edit_token(session, i, 0, accept_prob=t.accept_prob * (1 + 1e-9))) == []


def test_accepted_token_with_u_above_accept_prob(session):
    i = first_round(session, "rejected")
    t = session.rounds[i].tokens[0]  # a judged token with u >= accept_prob
    bad = edit_token(session, i, 0, status="accepted")
    found = check_session(bad)
    assert (i + 2, "tokens[0].u") in where(found)
    assert "status is 'accepted'" in str(next(p for p in found if p.field == "tokens[0].u"))
    assert t.u >= t.accept_prob


def test_rejected_token_with_u_below_accept_prob(session):
    i = first_round(session, "accepted")
    bad = edit_token(session, i, 0, u=0.0, status="rejected")
    assert (i + 2, "tokens[0].u") in where(check_session(bad))


def test_counts_must_match_statuses(session):
    i = first_round(session, "accepted")
    rnd = session.rounds[i]
    problems = check_session(edit_round(session, i, n_accepted=rnd.n_accepted + 1))
    assert where(problems) == [(i + 2, "n_accepted")]
    problems = check_session(edit_round(session, i, n_drafted=rnd.n_drafted - 1))
    assert where(problems) == [(i + 2, "n_drafted")]


def test_context_len_must_follow_the_running_count(session):
    problems = check_session(edit_round(session, 5, context_len=3))
    assert where(problems) == [(7, "context_len")]  # reported once, not for every later round
    problems = check_session(edit_round(session, 0, context_len=9))
    assert "the prompt and the earlier rounds hold 8 tokens" in str(problems[0])


@pytest.mark.parametrize(
    ("statuses", "field", "message"),
    [
        (("accepted", "rejected", "accepted"), "tokens[2].status", "after a rejection"),
        (("rejected", "rejected"), "tokens[1].status", "a second 'rejected'"),
        (("accepted", "discarded"), "tokens[1].status", "without a rejection"),
        (("accepted", "bonus", "accepted"), "tokens[2].status", "after the round's last"),
        (("rejected", "bonus"), "tokens[1].status", "'bonus' after a rejection"),
        (("accepted", "resampled"), "tokens[1].status", "'resampled' without a rejection"),
        (("accepted", "accepted"), "tokens", "does not end with a 'bonus'"),
        (("rejected", "discarded"), "tokens", "does not end with a 'resampled'"),
    ],
)
def test_status_order(statuses, field, message):
    def event(status: str) -> TokenEvent:
        if status == "accepted":
            return TokenEvent(7, "x", status, p=0.5, q=0.5, accept_prob=1.0, u=0.2, alpha=0.5)
        if status == "rejected":
            return TokenEvent(7, "x", status, p=0.5, q=1.0, accept_prob=0.5, u=0.9, alpha=0.5)
        numbers = {"p": 0.5, "q": 0.5, "alpha": 0.5, "residual": 0.5}  # as the status has
        return TokenEvent(7, "x", status, **{n: numbers[n] for n in NUMBERS_BY_STATUS[status]})

    header = synthetic_header(k=4, top_n=0)
    tokens = tuple(map(event, statuses))
    # The counts agree with the statuses, so only the order is reported.
    drafted = sum(t.status in ("accepted", "rejected", "discarded") for t in tokens)
    accepted = sum(t.status == "accepted" for t in tokens)
    rnd = Round(header.session_id, 0, 8, 1.0, 1.0, drafted, accepted, tokens)
    problems = check_session(Session(header, [rnd]))
    assert [(p.field, message in p.message) for p in problems] == [(field, True)], problems


def test_round_ended_by_eos_may_lack_its_last_token():
    header = synthetic_header(k=4, top_n=0)
    rounds = list(synthetic_rounds(header, 6, seed=4, eos_last=True, top_n=0))
    assert rounds[-1].tokens[-1].status not in ("resampled", "bonus")
    assert check_session(Session(header, rounds)) == []
    no_reason = dataclasses.replace(rounds[-1], finish_reason="max_new_tokens")
    problems = check_session(Session(header, [*rounds[:-1], no_reason]))
    assert where(problems) == [(7, "tokens")]


def test_probabilities_outside_0_1(session):
    i = first_round(session, "accepted")
    assert where(check_session(edit_token(session, i, 0, alpha=1.5))) == [
        (i + 2, "tokens[0].alpha")
    ]
    assert where(check_session(edit_token(session, i, 0, q_rest=float("nan")))) == [
        (i + 2, "tokens[0].q_rest")
    ]
    top = list(session.rounds[i].tokens[0].top)
    top[3] = (top[3][0], -0.25, top[3][2])
    assert where(check_session(edit_token(session, i, 0, top=tuple(top)))) == [
        (i + 2, "tokens[0].top[3]")
    ]


def test_finish_reason_only_on_the_last_round(session):
    problems = check_session(edit_round(session, 3, finish_reason="eos"))
    assert where(problems) == [(5, "finish_reason")]


def test_more_drafts_than_k():
    header = synthetic_header(k=4, top_n=0)
    rounds = list(synthetic_rounds(header, 3, top_n=0))
    narrow = dataclasses.replace(header, settings=dataclasses.replace(header.settings, k=2))
    rounds = [dataclasses.replace(r, settings=None) for r in rounds]
    problems = check_session(Session(narrow, rounds))
    assert all(p.field == "n_drafted" and "more than K = 2" in p.message for p in problems)
    assert len(problems) == 3


def test_expected_accept_prob_edge_cases():
    assert expected_accept_prob(0.3, 0.6) == 0.5
    assert expected_accept_prob(0.9, 0.3) == 1.0
    assert expected_accept_prob(0.2, 0.0) == 1.0  # verify(): infinite ratio
    assert expected_accept_prob(0.0, 0.0) == 0.0
    assert expected_accept_prob(0.0, 1.0) == 0.0  # greedy rejection


def test_limit_stops_early():
    header = synthetic_header(k=4, top_n=0)
    rounds = [dataclasses.replace(r, context_len=0) for r in synthetic_rounds(header, 30, top_n=0)]
    assert len(check_session(Session(header, rounds))) == 30
    assert len(check_session(Session(header, rounds), limit=5)) == 5


@pytest.mark.parametrize("name", ["p_rest", "q_rest"])
def test_rest_without_a_top_list(session, name, tmp_path):
    # p_rest / q_rest are the mass outside `top`: on a token without one they mean nothing.
    i = first_round(session, "accepted")
    rest = {"p_rest": None, "q_rest": None, name: 0.5}
    bad = edit_token(session, i, 0, top=(), top_text=(), **rest)
    problems = check_session(bad)
    assert where(problems) == [(i + 2, f"tokens[0].{name}")]
    assert "present without a top list" in problems[0].message
    # Read from a file, by the full check (inspect's); the check on opening leaves the top-N
    # lists unparsed, so it must not take a sound token's rest for one without a list.
    loaded = saved(bad, tmp_path / "bad.jsonl")
    assert where(check_session(loaded)) == [(i + 2, f"tokens[0].{name}")]
    assert check_session(saved(session, tmp_path / "sound.jsonl"), top_lists=False) == []


def saved(session: Session, path) -> Session:
    save(session, path)
    return load(path)


@pytest.mark.parametrize("session_id", ["abc", "7D92E712CB21", "7d92e712cb21ff", "7d92e712cb2g"])
def test_a_session_id_is_12_lowercase_hex_digits(session_id):
    session = synthetic_session(3)
    bad = Session(dataclasses.replace(session.header, session_id=session_id), [])
    assert where(check_session(bad)) == [(1, "session_id")]
    assert check_session(Session(session.header, [])) == []


def test_a_null_setting_is_an_error_not_the_default(tmp_path):
    """`"temperature": null` is not read as 1.0: a setting is left out (its default) or
    given, never null (a non-finite number written as null cannot be a valid setting)."""
    import json

    from specviz.core.trace.records import TraceError

    path = tmp_path / "t.jsonl"
    save(synthetic_session(2), path)
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["settings"]["temperature"] = None
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    with pytest.raises(TraceError, match="settings.temperature") as info:
        load(path)
    assert "never null" in str(info.value)
    del header["settings"]["temperature"]  # left out: the default
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    assert load(path).header.settings.temperature == 1.0
