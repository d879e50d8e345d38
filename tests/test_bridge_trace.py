"""A bridged round records both tokenizations (trace schema 1.8, Round.draft_pieces): the
draft's own pieces (its ids and their text as it cut them) and the range of the target's
drafted tokens each falls in; groups of the two cuts cover the same text; the record
survives a file, and a hostile one is refused by its reader and its checks."""

from __future__ import annotations

import dataclasses

import pytest

from specviz.core.decoding.k_policy import PolicyConfig
from specviz.core.drafters.bridge.recut import align, piece_texts
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.trace.check_session import check_session
from specviz.core.trace.extras.pieces import MAX_PIECE_TEXT, DraftPieces
from specviz.core.trace.files import load, save
from specviz.core.trace.parse import parse_round
from specviz.core.trace.records import MAX_K, Settings, TraceError
from specviz.core.trace.rounds import with_extras
from specviz.core.trace.serialize import round_to_json
from specviz.core.trace.session import Session
from tests.test_drafters import PROMPTS
from tests.test_tli import bridged, draft_tok  # noqa: F401 - the fixtures

# The draft's tokenizer learnt upper-case text (tests/test_tli.py), the target's lower-case:
# the draft cuts "EN" as one token, the target as two.
UPPER = "IN THE BEGINNING GOD CREATED THE HEAVEN"


def bridged_session(pair, kind: str, temperature: float = 0.0, rounds: int = 12,
                    prompt: str = PROMPTS[1]) -> Session:  # fmt: skip
    settings = Settings(k=4, temperature=temperature, seed=1, max_new_tokens=40)
    engine = SpeculativeEngine(pair, settings, drafter=DrafterConfig(kind),
                               policy=PolicyConfig("constant"))  # fmt: skip
    session = Session(engine.prefill(prompt, calibrate=False))
    for rnd in engine.run(max_rounds=rounds):
        session.append(rnd)
    return session


def joined(texts) -> str:
    return "".join(texts)


def test_a_string_round_records_the_drafts_own_cut(bridged, draft_tok):  # noqa: F811
    session = bridged_session(bridged, "string", prompt=UPPER)
    differ = 0
    for rnd in session.rounds:
        pieces = rnd.draft_pieces
        assert pieces is not None and len(pieces.ids) == len(pieces.text)
        # the draft's own cut: each text is what its id adds, as its tokenizer decodes it
        assert joined(pieces.text) == draft_tok.decode(list(pieces.ids))
        groups = pieces.groups(rnd.n_drafted)
        assert [g[0] for g in groups] == sorted(g[0] for g in groups)
        assert sum(g[1] - g[0] for g in groups) == len(pieces.ids)  # each piece once
        assert sum(g[3] - g[2] for g in groups) == rnd.n_drafted  # each token once
        both = [g for g in groups if g[1] > g[0] and g[3] > g[2]]
        for d0, d1, t0, t1 in both[:-1]:  # the last may run past what the round proposed
            assert joined(pieces.text[d0:d1]) == joined(t.text for t in rnd.tokens[t0:t1])
        differ += sum(1 for d0, d1, t0, t1 in both if (d1 - d0, t1 - t0) != (1, 1))
    assert differ > 0  # two tokenizers: somewhere they cut the same text differently


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_tli_round_cuts_as_the_target_does(bridged, draft_tok, temperature):  # noqa: F811
    session = bridged_session(bridged, "tli", temperature=temperature)
    assert any(r.n_drafted for r in session.rounds)
    context = list(session.header.prompt_ids)
    for rnd in session.rounds:
        pieces = rnd.draft_pieces
        drafted = rnd.tokens[: rnd.n_drafted]
        # a shared token is one string in both vocabularies
        assert [draft_tok.convert_ids_to_tokens(i) for i in pieces.ids] == [
            bridged.tokenizer.convert_ids_to_tokens(t.id) for t in drafted
        ]
        assert pieces.groups(rnd.n_drafted) == [(i, i + 1, i, i + 1)
                                                     for i in range(rnd.n_drafted)]  # fmt: skip
        target_texts = piece_texts(bridged.tokenizer, context, [t.id for t in drafted])
        if temperature == 0:  # text (random bytes at T 1 may make none)
            assert list(pieces.text) == target_texts
        context += [t.id for t in rnd.tokens if t.emitted]


def test_the_pieces_survive_a_file_and_pass_the_checks(bridged, tmp_path):  # noqa: F811
    session = bridged_session(bridged, "string", prompt=UPPER)
    assert check_session(session) == []
    save(session, tmp_path / "s.jsonl")
    back = load(tmp_path / "s.jsonl")
    assert len(back.rounds) == len(session.rounds)
    assert [r.draft_pieces for r in back.rounds] == [r.draft_pieces for r in session.rounds]
    assert check_session(back) == []


def test_a_bridged_trace_holds_the_targets_ids(bridged):  # noqa: F811
    """Ids of the target's vocabulary beyond the draft's (a smaller vocabulary of its own)
    are token ids of a bridged session."""
    session = bridged_session(bridged, "string", rounds=2)
    header = session.header
    assert header.draft.vocab_size < header.target.vocab_size
    high = header.target.vocab_size - 1
    moved = Session(dataclasses.replace(header, prompt_ids=(*header.prompt_ids[:-1], high),
                                        prompt_text=()))  # fmt: skip
    assert [p for p in check_session(moved) if p.field.startswith("prompt_ids")] == []


def test_the_checks_catch_pieces_that_do_not_fit_the_round(bridged):  # noqa: F811
    session = bridged_session(bridged, "string", rounds=4, prompt=UPPER)
    rnd = next(r for r in session.rounds if r.draft_pieces.ids)
    vocab = session.header.draft.vocab_size
    pieces = rnd.draft_pieces.to_json()
    wrong_id = {**pieces, "ids": [vocab, *pieces["ids"][1:]]}
    too_far = {**pieces, "target": [*pieces["target"][:-1], [0, rnd.n_drafted + 1]]}
    too_far["target"][-1][0] = too_far["target"][-2][0] if len(pieces["ids"]) > 1 else 0
    for bad, name in ((wrong_id, "draft_pieces.ids[0]"), (too_far, "draft_pieces.target")):
        broken = Session(session.header)
        for r in session.rounds:
            broken.append(with_extras(r, draft_pieces=bad) if r is rnd else r)
        assert name in [p.field for p in check_session(broken)]


LINE = {"type": "round", "index": 0, "context_len": 4, "draft_ms": 1.0, "verify_ms": 1.0,
        "n_drafted": 0, "n_accepted": 0, "tokens": []}  # fmt: skip
GOOD = {"ids": [5, 7, 9], "text": ["In", " the", " be"], "target": [[0, 1], [1, 2], [2, 2]]}


def test_the_reader_takes_pieces_and_refuses_hostile_ones():
    assert parse_round({**LINE, "draft_pieces": GOOD}, "s", 2).draft_pieces.to_json() == GOOD
    rnd = parse_round({**LINE, "draft_pieces": GOOD}, "s", 2)
    assert round_to_json(rnd)["draft_pieces"] == GOOD
    assert "draft_pieces" not in round_to_json(parse_round(LINE, "s", 2))
    hostile = [
        {"ids": [], "text": []},  # a field missing
        {**GOOD, "more": 1},  # a field unknown
        {**GOOD, "ids": [5, -1, 9]},
        {**GOOD, "ids": [5, True, 9]},
        {**GOOD, "ids": [5, 7.0, 9]},
        {**GOOD, "ids": [5, 7]},  # one short
        {**GOOD, "text": ["In", 3, " be"]},
        {**GOOD, "text": ["In", "x" * (MAX_PIECE_TEXT + 1), " be"]},
        {**GOOD, "target": [[0, 1], [1, 2], [0, 2]]},  # going back
        {**GOOD, "target": [[0, 1], [2, 1], [2, 2]]},  # end before start
        {**GOOD, "target": [[0, 1], [1, 2], [-1, 2]]},
        {**GOOD, "target": [[0, 1], [1, 2], [2]]},
        {**GOOD, "target": [[0, 1], [1, 2], "2-2"]},
        {**GOOD, "target": [[0, 1], [1, 2], [2, 3.5]]},
        {
            "ids": [1] * (MAX_K + 1),
            "text": ["a"] * (MAX_K + 1),
            "target": [[0, 0]] * (MAX_K + 1),
        },  # fmt: skip
        {**GOOD, "ids": {"0": 5}},
        [1, 2, 3],
    ]
    for bad in hostile:
        with pytest.raises(TraceError, match="draft_pieces"):
            parse_round({**LINE, "draft_pieces": bad}, "s", 2)


def test_groups_of_two_cuts():
    pieces = {"ids": [1, 2, 3, 4], "text": ["The", " be", "gin", "ning"],
              "target": [[0, 1], [1, 2], [1, 2], [1, 2]]}  # fmt: skip
    assert DraftPieces.from_value(pieces).groups(2) == [(0, 1, 0, 1), (1, 4, 1, 2)]
    # one piece over two tokens, a piece past the proposal, the end-of-text the bridge added
    pieces = {"ids": [1, 2], "text": ["Hello", "!"], "target": [[0, 2], [2, 2]]}
    assert DraftPieces.from_value(pieces).groups(3) == [(0, 1, 0, 2), (1, 2, 2, 2), (2, 2, 2, 3)]
    # an unchecked trace's ranges past the round are cut to it
    assert DraftPieces((1,), ("x",), ((0, 9),)).groups(2) == [(0, 1, 0, 2)]


def test_align_and_piece_texts(draft_tok):  # noqa: F811
    assert align(["The", " be", "gin", "ning", "!"], ["The", " beginning"]) == [
        (0, 1), (1, 2), (1, 2), (1, 2), (2, 2)
    ]  # fmt: skip
    assert align(["Hello"], ["He", "", "llo"]) == [(0, 3)]
    assert align(["", "é"], ["é"]) == [(0, 1), (0, 1)]
    ids = draft_tok.encode("the café", add_special_tokens=False)
    before = draft_tok.encode("In", add_special_tokens=False)
    texts = piece_texts(draft_tok, before, ids)
    assert "".join(texts) == "the café" and len(texts) == len(ids)
    assert "\ufffd" not in "".join(texts)  # é's first byte alone is "", not a broken char
