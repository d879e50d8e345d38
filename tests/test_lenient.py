"""The lenient rule (core.decoding.lenient, Leviathan et al.'s appendix A.5): l = 1 is the
exact rule (greedy equals generate, the end-to-end test passes); l = 0.5 is LOSSY and the
same end-to-end test fails it; its rounds record l and their tests, read back byte for
byte, and a wrong recorded test is named by its check."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from specviz.core.decoding import lenient
from specviz.core.decoding.lenient import verify_lenient
from specviz.core.decoding.verify import verify
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.trace.check_session import check_session
from specviz.core.trace.files import load, save
from specviz.core.trace.records import Settings
from specviz.core.trace.rounds import with_extras
from specviz.core.trace.session import Session
from specviz.core.trace.verifiers import spec
from tests.test_sampling import LEVEL


def test_lenience_one_is_the_exact_rule_draw_for_draw():
    rng = np.random.default_rng(0)
    for seed in range(50):
        k = int(rng.integers(1, 5))
        p = torch.tensor(rng.dirichlet(np.ones(6), size=k + 1))
        q = torch.tensor(rng.dirichlet(np.ones(6), size=k))
        drafts = torch.multinomial(q, 1).squeeze(-1)
        a, tests = verify_lenient(p, q, drafts, torch.Generator().manual_seed(seed), 1.0)
        b = verify(p, q, drafts, torch.Generator().manual_seed(seed))
        assert tuple(tests) == b.accept_probs
        assert (a.n_accepted, a.next_token, a.accept_probs) == (
            b.n_accepted,
            b.next_token,
            b.accept_probs,
        )


def test_the_rule_is_labelled_lossy():
    s = spec("lenient")
    assert not s.lossless and "LOSSY" in s.label and "LOSSY" in s.description


def test_greedy_lenient_equals_generate(pair, monkeypatch):
    from tests.test_drafters import PROMPTS, greedy_reference

    monkeypatch.setattr(lenient, "LENIENCE", 1.0)
    for prompt in PROMPTS:
        engine = SpeculativeEngine(
            pair, Settings(k=4, temperature=0, max_new_tokens=20, verifier="lenient")
        )
        header = engine.prefill(prompt, calibrate=False)
        ours = [t.id for r in engine.run() for t in r.tokens if t.emitted]
        assert ours == greedy_reference(pair.target, list(header.prompt_ids), 20, pair.eos_token_id)


def test_lenient_rounds_are_recorded_and_checked(pair, tmp_path):
    engine = SpeculativeEngine(pair, Settings(k=4, seed=3, max_new_tokens=40, verifier="lenient"))
    header = engine.prefill("And the earth was", calibrate=False)
    session = Session(header, list(engine.run()))
    assert check_session(session) == []
    numbers = [r.extras.get("lenient") for r in session.rounds]
    assert all(n is not None and n.lenience == 0.5 for n in numbers)
    path = tmp_path / "lenient.jsonl"
    save(session, path)
    back = load(path)
    assert back.header.settings.lossy
    assert [r.extras.get("lenient") for r in back.rounds] == numbers
    again = tmp_path / "again.jsonl"
    save(back, again)
    assert again.read_bytes() == path.read_bytes()
    rnd = next(r for r in session.rounds if r.n_judged)
    n = rnd.extras["lenient"]
    bad = with_extras(rnd, lenient={"lenience": 0.5, "accept": [0.0, *n.accept[1:]]})
    rounds = [bad if r is rnd else r for r in session.rounds]
    problems = check_session(Session(header, rounds))
    assert any(p.field == "lenient.accept[0]" for p in problems)
    # a lenient round without its numbers, and its numbers in a token rule's round
    bare = with_extras(rnd, lenient=None)
    rounds = [bare if r is rnd else r for r in session.rounds]
    said = [p.message for p in check_session(Session(header, rounds))]
    assert "a lenient round without its numbers" in said, said
    token = dataclasses.replace(rnd, settings=dataclasses.replace(rnd.settings, verifier="token"))
    rounds = [token if r is rnd else r for r in session.rounds]
    said = [p.message for p in check_session(Session(header, rounds))]
    assert "lenient numbers in a round not verified by the lenient rule" in said, said


def test_the_end_to_end_test_passes_at_one_and_fails_at_a_half(pair, monkeypatch):
    from tests.test_drafters import lookup_sequences, sequence_pvalue

    pvalues = {}
    for lenience in (1.0, 0.5):
        monkeypatch.setattr(lenient, "LENIENCE", lenience)
        pvalues[lenience] = sequence_pvalue(pair, *lookup_sequences(pair, "lenient"))
    print(f"lenient end-to-end p-values: {pvalues}")
    assert pvalues[1.0] > LEVEL
    assert pvalues[0.5] < LEVEL
