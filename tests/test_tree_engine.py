"""Token trees in the engine (settings.tree_width > 1): the project's end-to-end test (whole
emitted sequences against a fresh target forward at every prefix, tests/test_drafters.py)
under both draws and both shapes, K 1 and 4, T 1 and 0.7 and a weak draft; greedy equals
the target's greedy decoding; both caches equal a fresh forward after every round; the
trace is valid, reads back, and a tree whose numbers contradict its fates is named. A
drafter that prunes its drawn children by their q (a reranked sampled tree) fails the
end-to-end test: what core.tree.walk says makes the rule exact."""

from __future__ import annotations

import pytest
import torch

from specviz.core.trace.rounds import with_extras
from tests.test_block import LEVEL, weak_draft

TREE_CASES = {  # (K, draw, shape, sampling, tokens per session, weak draft)
    "sample-K4-T1": (4, "sample", "full", dict(temperature=1.0), 6, False),
    "dynamic-sample-K4-T0.7": (4, "sample", "dynamic", dict(temperature=0.7), 6, False),
    "dynamic-topk-K1-T1": (1, "topk", "dynamic", dict(temperature=1.0), 4, False),
    "sample-K1-weak": (1, "sample", "full", dict(temperature=1.0), 4, True),
    "sample-K1-T1.5": (1, "sample", "full", dict(temperature=1.5), 4, False),  # as below
    "topk-K4-weak": (4, "topk", "full", dict(temperature=1.0), 6, True),
}


def tree_settings(k, draw="sample", shape="full", width=2, budget=8, **sampling):
    from specviz.core.trace.records import Settings

    return Settings(k=k, tree_width=width, tree_budget=budget, tree_draw=draw,
                    tree_shape=shape, **sampling)  # fmt: skip


def tree_sequences(pair, settings, n_runs, prompt_ids, seed):
    """n_runs sessions from one prompt with one running generator: (sequences, fates)."""
    from specviz.core.engine.speculative import SpeculativeEngine

    engine = SpeculativeEngine(pair, settings, trace=False)
    gen = torch.Generator().manual_seed(seed)
    sequences, fates = [], set()
    for _ in range(n_runs):
        engine.prefill("", prompt_ids=prompt_ids, calibrate=False)
        engine.generator = gen
        rounds = list(engine.run())
        sequences.append(tuple(t.id for r in rounds for t in r.tokens if t.emitted))
        fates.update(f for r in rounds for f in r.tree.fate)
        fates.update(t.status for r in rounds for t in r.tokens)
    return sequences, fates


@pytest.mark.parametrize("case", list(TREE_CASES))
def test_tree_sessions_follow_the_target(pair, case):
    from specviz.core.decoding.warp import SamplingConfig
    from tests.test_drafters import N_RUNS, looping_prompt, sequence_pvalue

    k, draw, shape, sampling, n_tokens, weak = TREE_CASES[case]
    settings = tree_settings(k, draw, shape, max_new_tokens=n_tokens, **sampling)
    prompt_ids = looping_prompt(pair)
    used = weak_draft(pair) if weak else pair
    sequences, fates = tree_sequences(used, settings, N_RUNS, prompt_ids, seed=3)
    assert {"accepted", "rejected", "resampled"} <= fates
    assert sequence_pvalue(pair, prompt_ids, sequences, SamplingConfig(**sampling)) > LEVEL


def test_pruning_drawn_children_by_q_is_caught(pair, monkeypatch):
    """Draw W + 2 children and keep the W likeliest under q (a reranked sampled tree): the
    children are no longer i.i.d. draws from q, and the emitted text no longer follows p."""
    from specviz.core.decoding.warp import SamplingConfig
    from specviz.core.drafters import tree_draft
    from tests.test_drafters import N_RUNS, looping_prompt, sequence_pvalue

    honest = tree_draft._children

    def pruned(logits, q, n, rule, greedy, generator):
        drawn = honest(logits, q, n + 2, rule, greedy, generator)
        return sorted(drawn, key=lambda t: -float(q[t]))[:n]

    monkeypatch.setattr(tree_draft, "_children", pruned)
    settings = tree_settings(1, "sample", width=2, max_new_tokens=4, temperature=1.5)
    prompt_ids = looping_prompt(pair)
    sequences, _ = tree_sequences(pair, settings, N_RUNS, prompt_ids, seed=3)
    assert sequence_pvalue(pair, prompt_ids, sequences, SamplingConfig(1.5)) < 1e-6


@pytest.mark.parametrize("draw,shape", [("sample", "full"), ("topk", "full"),
                                        ("topk", "dynamic")])  # fmt: skip
def test_greedy_trees_equal_generate(pair, draw, shape):
    from specviz.core.engine.speculative import SpeculativeEngine
    from tests.test_drafters import PROMPTS, greedy_reference

    for prompt in PROMPTS:
        settings = tree_settings(4, draw, shape, width=3, budget=12, temperature=0,
                                 max_new_tokens=20)  # fmt: skip
        engine = SpeculativeEngine(pair, settings)
        header = engine.prefill(prompt, calibrate=False)
        rounds = list(engine.run())
        ours = [t.id for r in rounds for t in r.tokens if t.emitted]
        assert ours == greedy_reference(pair.target, list(header.prompt_ids), 20, pair.eos_token_id)
        assert max(r.n_drafted for r in rounds) > 4  # trees, not chains


@pytest.mark.parametrize("shape", ["full", "dynamic"])
def test_tree_rounds_keep_the_caches_exact_and_the_trace_valid(pair, tmp_path, shape):
    from specviz.core.engine.speculative import SpeculativeEngine
    from specviz.core.trace.check_session import check_session
    from specviz.core.trace.files import load, save
    from specviz.core.trace.session import Session
    from tests.test_engine import assert_caches_fresh

    settings = tree_settings(4, "sample", shape, width=3, budget=20, temperature=1.0, seed=5,
                             max_new_tokens=50)  # fmt: skip
    engine = SpeculativeEngine(pair, settings)
    session = Session(engine.prefill("And the earth was", calibrate=False))
    for rnd in engine.run(max_rounds=10):
        session.append(rnd)
        assert len(rnd.tree.parent) == rnd.n_drafted <= 20
        assert_caches_fresh(engine, pair)
    assert check_session(session) == []
    path = tmp_path / "tree.jsonl"
    save(session, path)
    back = load(path)
    assert [r.tree for r in back.rounds] == [r.tree for r in session.rounds]
    assert back.header.settings == settings and check_session(back) == []


def test_a_tree_that_contradicts_its_numbers_is_named(pair):
    from specviz.core.engine.speculative import SpeculativeEngine
    from specviz.core.trace.check_session import check_session
    from specviz.core.trace.session import Session

    engine = SpeculativeEngine(pair, tree_settings(4, temperature=1.0, seed=5,
                                                   max_new_tokens=30))  # fmt: skip
    session = Session(engine.prefill("And the earth was", calibrate=False))
    for rnd in engine.run():
        session.append(rnd)
    assert check_session(session) == []
    rnd = next(r for r in session.rounds if "rejected" in r.tree.fate)
    i = rnd.tree.fate.index("rejected")

    def broken(**tree):
        bad = with_extras(rnd, tree={**rnd.tree.to_json(), **tree})
        return [p.field for p in check_session(Session(session.header, [bad]))
                if p.field.startswith("tree")]  # fmt: skip

    fates = list(rnd.tree.fate)
    fates[i] = "accepted"
    assert broken(fate=fates)  # a rejected node called accepted
    u = list(rnd.tree.u)
    u[i] = 0.0
    assert f"tree.fate[{i}]" in broken(u=u)  # u = 0 passes any test: not a rejection
    parents = list(rnd.tree.parent)
    parents[-1] = len(parents)
    assert broken(parent=parents)  # a parent after its child
    assert "tree.rule" in broken(rule="topk")  # drawn children judged as q's top ones
