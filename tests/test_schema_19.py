"""Schema 1.9: a judged token may carry what its test used (p_tried, q_tried) where that is
not its own p and q (a tree's later sibling, the topk rule); accept_prob is then
min(1, p_tried/q_tried), and the numbers go on judged tokens only."""

from __future__ import annotations

import pytest

from specviz.core.trace.check_token import check_token
from specviz.core.trace.records import SCHEMA, SCHEMA_MINOR, TRIED, TokenEvent

VOCAB, TOP_N = 100, 5


def judged(status="rejected", **numbers) -> TokenEvent:
    base = {"p": 0.767, "q": 0.4, "accept_prob": 1.0, "u": 0.5, "alpha": 0.6}
    return TokenEvent(7, "x", status, **{**base, **numbers})


def problems(event: TokenEvent, rule: str = "tree") -> list[tuple[str, str]]:
    return check_token(event, VOCAB, TOP_N, rule=rule)


def test_the_schema_is_1_8_and_names_the_fields():
    assert SCHEMA == "specviz.trace/1.10" and SCHEMA_MINOR == 10
    assert TRIED == ("p_tried", "q_tried")


def test_accept_prob_is_checked_against_what_the_test_used():
    # a later sibling under "sample": p(x) = 0.767 but tried against p_tried = 0.2, q = 0.4
    ok = judged("rejected", p_tried=0.2, accept_prob=0.5, u=0.7)
    assert problems(ok) == []
    # the same numbers without p_tried: min(1, p/q) = 1, not 0.5
    assert [f for f, _ in problems(judged("rejected", accept_prob=0.5, u=0.7))] == ["accept_prob"]
    bad = judged("rejected", p_tried=0.3, accept_prob=0.5, u=0.7)
    [(name, message)] = problems(bad)
    assert name == "accept_prob" and "min(1, p_tried/q)" in message


def test_topk_tests_p_tried_alone():
    ok = judged("accepted", p_tried=0.997, q_tried=1.0, accept_prob=0.997, u=0.5)
    assert problems(ok) == []
    bad = judged("accepted", p_tried=0.997, q_tried=1.0, accept_prob=1.0, u=0.5)
    [(name, message)] = problems(bad)
    assert name == "accept_prob" and "min(1, p_tried/q_tried)" in message


def test_q_tried_needs_p_tried():
    [(name, message)] = problems(judged("accepted", q_tried=1.0, accept_prob=1.0))
    assert name == "q_tried" and "without p_tried" in message


@pytest.mark.parametrize("status", ["discarded", "resampled", "bonus"])
def test_the_tried_numbers_go_on_judged_tokens_only(status):
    numbers = {"discarded": {"q": 0.4}, "resampled": {"p": 0.5, "q": 0.2, "alpha": 0.6,
               "residual": 0.3}, "bonus": {"p": 0.5}}[status]  # fmt: skip
    event = TokenEvent(7, "x", status, **numbers, p_tried=0.5)
    assert ("p_tried", f"present on a '{status}' token (judged tokens only)") in problems(event)


def test_a_tried_number_outside_0_1_is_named():
    names = [f for f, _ in problems(judged("accepted", p_tried=1.5, accept_prob=1.0, u=0.1))]
    assert "p_tried" in names
