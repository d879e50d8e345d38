"""Issue 32 item 1: a tree round's tokens carry the target's p(x) and the draft's q(x) as
every token does, and what their test used apart (schema 1.9: p_tried, and q_tried = 1 under
topk); a 1.7 tree trace, whose tokens carried the tested p as `p`, reads as 1.9 writes it;
the window says both."""

from __future__ import annotations

import dataclasses
import json

import pytest

from specviz.core.trace.check_session import check_session
from specviz.core.trace.records import EVENT_LISTS, JUDGED, Settings
from specviz.core.trace.session import Session

PROMPT = "And the earth was"


def tree_session(pair, draw: str) -> Session:
    from specviz.core.engine.speculative import SpeculativeEngine

    settings = Settings(k=4, temperature=1.0, seed=5, max_new_tokens=40, tree_width=3,
                        tree_budget=20, tree_draw=draw)  # fmt: skip
    engine = SpeculativeEngine(pair, settings)
    session = Session(engine.prefill(PROMPT, calibrate=False))
    for rnd in engine.run():
        session.append(rnd)
    return session


@pytest.fixture(scope="module", params=["sample", "topk"])
def session(request, pair) -> Session:
    return tree_session(pair, request.param)


def judged_nodes(rnd):
    """(token, its node) of each judged token of a tree round's chain view."""
    judged = [t for t in rnd.tokens if t.status in JUDGED]
    return list(zip(judged, rnd.tree.chain(), strict=False))


def test_a_tree_token_carries_its_nodes_p_and_q_and_its_test_apart(session):
    tested_apart = 0
    for rnd in session.rounds:
        topk = rnd.tree.rule == "topk"
        for token, node in judged_nodes(rnd):
            assert token.id == rnd.tree.token[node]
            assert token.p == pytest.approx(rnd.tree.p[node], rel=1e-6)  # the target's
            assert token.q == pytest.approx(rnd.tree.q[node], rel=1e-6)  # the draft's
            assert token.p_tried == rnd.tree.p_tried[node]
            assert token.q_tried == (1.0 if topk else None)
            q = token.q_tried if topk else token.q
            a = min(1.0, token.p_tried / q) if q > 0 else float(token.p_tried > 0)
            assert token.accept_prob == pytest.approx(a, rel=1e-6)
            tested_apart += not math_close(token.p_tried, token.p) or topk
    assert tested_apart  # some token was tested against more than its own p and q
    assert check_session(session) == []


def math_close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b)) + 1e-12


def as_schema_17(line: str) -> str:
    """A 1.9 line as 1.5 to 1.8 wrote it: a judged tree token's p was its p_tried and, under
    topk, its q was 1."""
    obj = json.loads(line)
    if obj.get("type") == "session":
        obj["schema"] = "specviz.trace/1.7"
    for token in obj.get("tokens", ()):
        if "p_tried" in token:
            token["p"] = token.pop("p_tried")
        if "q_tried" in token:
            token["q"] = token.pop("q_tried")
    return json.dumps(obj)


def test_a_1_7_tree_trace_reads_as_1_8_writes_it(session, tmp_path):
    from specviz.core.trace.files import load, save

    save(session, tmp_path / "new.jsonl")
    lines = (tmp_path / "new.jsonl").read_text().splitlines()
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join(map(as_schema_17, lines)) + "\n")
    assert not any("p_tried" in t for line in map(json.loads, old.read_text().splitlines())
                   for t in line.get("tokens", ()))  # fmt: skip
    back = load(old)
    assert back.warnings == [] and check_session(back) == []
    for i, rnd in enumerate(session.rounds):
        assert back.details(i).tokens == rnd.tokens  # the top-N lists parsed too
        assert numbers(back.rounds[i]) == numbers(rnd)  # the lists may be left unparsed


def numbers(rnd) -> list[dict]:
    return [{k: v for k, v in vars(t).items() if k not in EVENT_LISTS} for t in rnd.tokens]


def test_a_token_whose_numbers_are_not_its_nodes_is_named(session):
    """1.7's numbers read as 1.9's: a later sibling's p its p_tried, a topk token's q 1."""
    old = {}
    for rnd in session.rounds:
        for j, t in enumerate(rnd.tokens):
            if t.status in JUDGED and not math_close(t.p_tried, t.p):
                old.setdefault("p", (rnd, j, {"p": t.p_tried}))
            if t.q_tried is not None and not math_close(t.q_tried, t.q):
                old.setdefault("q", (rnd, j, {"q": t.q_tried}))
    assert old
    for name, (rnd, j, numbers) in old.items():
        tokens = list(rnd.tokens)
        tokens[j] = dataclasses.replace(tokens[j], **numbers)
        bad = dataclasses.replace(rnd, tokens=tuple(tokens))
        fields = [p.field for p in check_session(Session(session.header, [bad]))]
        assert f"tokens[{j}].{name}" in fields


def test_a_chain_token_has_no_tried_numbers(pair):
    from specviz.core.engine.speculative import SpeculativeEngine

    engine = SpeculativeEngine(pair, Settings(k=4, temperature=1.0, seed=5, max_new_tokens=12))
    session = Session(engine.prefill(PROMPT, calibrate=False))
    for rnd in engine.run():
        session.append(rnd)
    assert all(t.p_tried is None and t.q_tried is None for r in session.rounds for t in r.tokens)
    rnd = next(r for r in session.rounds if r.n_judged)
    j = next(j for j, t in enumerate(rnd.tokens) if t.status in JUDGED)
    tokens = list(rnd.tokens)
    tokens[j] = dataclasses.replace(tokens[j], p_tried=tokens[j].p)
    bad = dataclasses.replace(rnd, tokens=tuple(tokens))
    assert f"tokens[{j}].p_tried" in [p.field for p in check_session(Session(session.header,
                                                                             [bad]))]  # fmt: skip


def test_the_window_says_the_targets_p_and_what_the_test_used(session):
    from specviz.core.metrics.position_bars import position_bars
    from specviz.gui.distribution.accept_gauge import axis_label
    from specviz.gui.distribution.text import row_text, summary_html
    from specviz.gui.stream.figures import fmt

    for rnd in session.rounds:
        for position, token in enumerate(t for t in rnd.tokens if t.status in JUDGED):
            bars = position_bars(rnd, position)
            text = summary_html(bars)
            assert f"the target gives it p = {fmt(token.p)}" in text
            hover = row_text(bars, bars.drafted_bar)
            if not math_close(token.p_tried, token.p):
                assert f"p_tried = {fmt(token.p_tried)}" in text
                assert "min(1, p_tried/" in text and f"p_tried = {fmt(token.p_tried)}" in hover
                assert "p_tried" in axis_label(bars)
            if token.q_tried is not None:
                assert f"q_tried = {fmt(token.q_tried)}" in text and "/q_tried)" in text
                assert axis_label(bars) == "u vs p_tried"
            if math_close(token.p_tried, token.p) and token.q_tried is None:
                assert "tested against" not in text and "min(1, p/q)" in text
                assert axis_label(bars) == "u vs min(1,p/q)"
