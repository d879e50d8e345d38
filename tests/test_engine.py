"""The engine on real (small, random) GPT-2 models: greedy equals the target's own greedy
decoding, cached logits equal a fresh forward, the same seed gives the same trace."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from specviz.core.decoding import forward as decode_module
from specviz.core.decoding.verify import acceptance_mass, residual_distribution
from specviz.core.decoding.warp import SamplingConfig, warp
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.trace.records import Settings
from specviz.core.trace.serialize import round_to_json

PROMPTS = ["In the beginning God", "A fool and his", "The quick brown fox jumps over"]


@pytest.mark.parametrize("k", [1, 3, 8])
def test_greedy_equals_target_generate(pair, k):
    for prompt in PROMPTS:
        engine = SpeculativeEngine(pair, Settings(k=k, temperature=0, max_new_tokens=24))
        header = engine.prefill(prompt, calibrate=False)
        rounds = list(engine.run())
        ours = [t.id for r in rounds for t in r.tokens if t.emitted]
        ids = torch.tensor([list(header.prompt_ids)])
        reference = pair.target.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=24,
            pad_token_id=pair.eos_token_id,
        )[0, ids.shape[1] :].tolist()
        assert ours == reference, f"K={k} prompt={prompt!r}"


def fresh_logits(model, ids, vocab):
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0, -1, :vocab]


def assert_caches_fresh(engine, pair) -> None:
    """Both caches, fed what they lack of the engine's ids, give a fresh forward's next
    logits (then are cut back to where they were, for the next round)."""
    from specviz.core.decoding.kv_cache import crop_to

    ids = list(engine.ids)
    caches = [(pair.target, engine.t_cache), (pair.draft, engine.d_cache)]
    for model, cache in caches[: 1 if pair.draft is None else 2]:  # no draft model: the target's
        cached_len = cache.get_seq_length()
        assert cached_len <= len(ids) - 1
        with torch.inference_mode():
            cached = decode_module.forward(model, ids[cached_len:], cache, pair.vocab_size, 1)
        crop_to(cache, cached_len)
        torch.testing.assert_close(
            cached[0], fresh_logits(model, ids, pair.vocab_size), atol=1e-4, rtol=1e-4
        )


def test_cached_logits_equal_fresh_forward(pair):
    engine = SpeculativeEngine(pair, Settings(k=4, temperature=1.0, seed=3, max_new_tokens=60))
    engine.prefill("And the earth was", calibrate=False)
    statuses = set()
    for rnd in engine.run(max_rounds=12):
        statuses.update(t.status for t in rnd.tokens)
        assert_caches_fresh(engine, pair)
        if engine.finished:
            break
    assert {"accepted", "rejected", "resampled"} <= statuses  # both paths were exercised


def test_caches_are_cropped_not_recomputed(pair, monkeypatch):
    fed: list[tuple[str, int]] = []
    real, real_states = decode_module.forward, decode_module.forward_states

    def spy(model, tokens, cache, vocab, keep):
        fed.append(("target" if model is pair.target else "draft", len(tokens)))
        return real(model, tokens, cache, vocab, keep)

    def spy_states(model, tokens, cache, vocab, keep, layers=()):
        fed.append(("target" if model is pair.target else "draft", len(tokens)))
        return real_states(model, tokens, cache, vocab, keep, layers)

    import specviz.core.decoding.verifier as verifier_module
    import specviz.core.drafters.base as drafters_module
    import specviz.core.engine.speculative as engine_module

    monkeypatch.setattr(engine_module, "forward_states", spy_states)  # the prefill
    monkeypatch.setattr(verifier_module, "forward_states", spy_states)  # a round's target pass
    monkeypatch.setattr(drafters_module, "forward", spy)
    engine = SpeculativeEngine(pair, Settings(k=3, seed=1, max_new_tokens=40))
    engine.prefill("A fool and his money", calibrate=False)
    fed.clear()
    rounds = list(engine.run())
    target_calls = [n for who, n in fed if who == "target"]
    assert target_calls == [r.n_drafted + 1 for r in rounds]  # one pass of K+1 per round
    draft_calls = [n for who, n in fed if who == "draft"]
    # The draft is fed one token per step, two after a round that accepted everything.
    assert set(draft_calls) <= {1, 2}
    assert sum(draft_calls) == sum(r.n_drafted for r in rounds) + sum(
        1 for r in rounds[:-1] if r.n_accepted == r.n_drafted
    )


TIMINGS = ("draft_ms", "verify_ms", "events_ms")


def strip_timing(rnd):
    return {k: v for k, v in round_to_json(rnd).items() if k not in TIMINGS}


def test_same_seed_same_trace(pair):
    traces = []
    for _ in range(2):
        engine = SpeculativeEngine(pair, Settings(k=4, seed=7, max_new_tokens=30, top_p=0.95))
        engine.prefill("The quick brown", calibrate=False)
        traces.append([strip_timing(r) for r in engine.run()])
    assert traces[0] == traces[1]
    other = SpeculativeEngine(pair, Settings(k=4, seed=8, max_new_tokens=30, top_p=0.95))
    other.prefill("The quick brown", calibrate=False)
    assert [strip_timing(r) for r in other.run()] != traces[0]


def fresh_probs(model, ids, vocab, config):
    """Warped next-token probabilities after ids, from a fresh forward without a cache."""
    return warp(fresh_logits(model, ids, vocab), config).double()


def test_round_records_agree_with_the_rule(pair):
    settings = Settings(k=5, seed=2, max_new_tokens=50)
    config = SamplingConfig(settings.temperature, settings.top_k, settings.top_p)
    engine = SpeculativeEngine(pair, settings)
    header = engine.prefill("In the beginning", calibrate=True)
    assert header.baseline_ms_per_token > 0 and header.draft_ms_per_token > 0
    rounds = list(engine.run())
    ids = list(engine.ids)
    statuses = [t.status for r in rounds for t in r.tokens]
    # Every branch of the rule is exercised, so every check below runs.
    assert {"accepted", "rejected", "discarded", "resampled", "bonus"} <= set(statuses)
    total = 0
    for rnd in rounds:
        judged = [t for t in rnd.tokens if t.status in ("accepted", "rejected")]
        assert rnd.n_accepted == sum(t.status == "accepted" for t in judged)
        assert rnd.events_ms is not None and rnd.events_ms >= 0
        context = ids[: rnd.context_len]
        for i, t in enumerate(rnd.tokens):
            here = context + [e.id for e in rnd.tokens[:i] if e.status == "accepted"]
            p = fresh_probs(pair.target, here, pair.vocab_size, config)
            q = fresh_probs(pair.draft, here, pair.vocab_size, config)
            if t.status in ("accepted", "rejected"):
                # The record carries the real p(x) and q(x), and the rule's decision on them.
                assert t.p == pytest.approx(float(p[t.id]), abs=1e-5)
                assert t.q == pytest.approx(float(q[t.id]), abs=1e-5)
                assert t.accept_prob == pytest.approx(min(1.0, t.p / t.q), rel=1e-6)
                assert (t.u < t.accept_prob) == (t.status == "accepted")
                assert t.alpha == pytest.approx(float(acceptance_mass(p, q)), abs=1e-5)
                assert len(t.top) == 20 and len(t.top_text) == 20
            elif t.status == "resampled":
                assert rnd.tokens[rnd.n_accepted].status == "rejected"
                residual = residual_distribution(p, q)  # at the rejected token's position
                assert t.residual == pytest.approx(float(residual[t.id]), abs=1e-5)
                assert t.residual > 0 and t.residual_top
                assert len(t.residual_text) == len(t.residual_top)
            elif t.status == "bonus":
                assert t.p == pytest.approx(float(p[t.id]), abs=1e-5) and t.p > 0
        last = rnd.tokens[-1]
        assert last.status in ("resampled", "bonus") or rnd.finish_reason == "eos"
        total += rnd.n_emitted
        assert rnd.context_len + rnd.n_emitted == len(header.prompt_ids) + total
    assert total == 50 or engine.finish_reason == "eos"


def test_settings_change_applies_next_round(pair):
    engine = SpeculativeEngine(pair, Settings(k=2, seed=0, max_new_tokens=40))
    engine.prefill("Blessed are the", calibrate=False)
    assert engine.step().n_drafted == 2
    engine.update_settings(dataclasses.replace(engine.settings, k=6, seed=99))
    rnd = engine.step()
    assert rnd.n_drafted == 6 and rnd.settings.k == 6 and rnd.settings.seed == 0


def test_max_new_tokens_is_exact(pair):
    # Seeds at which no run ends on an end-of-text token, so the cap is what ends each one;
    # K = 4 and 7 reach the cap in mid-round, where the round's K must shrink.
    for k in (1, 4, 7):
        engine = SpeculativeEngine(pair, Settings(k=k, seed=k, max_new_tokens=9))
        engine.prefill("Never trust", calibrate=False)
        rounds = list(engine.run())
        assert rounds[-1].finish_reason == "max_new_tokens", k
        assert sum(r.n_emitted for r in rounds) == 9 == engine.n_generated


def test_bad_prompt_and_settings(pair):
    with pytest.raises(ValueError, match="empty"):
        SpeculativeEngine(pair, Settings()).prefill("   ")
    for bad in (
        Settings(k=0),
        Settings(k=33),
        Settings(temperature=-1),
        Settings(top_p=0),
        Settings(top_p=1.5),
        Settings(max_new_tokens=0),
    ):
        with pytest.raises(ValueError):
            SpeculativeEngine(pair, bad)


def test_session_context_ids(pair):
    from specviz.core.trace.session import Session

    engine = SpeculativeEngine(pair, Settings(k=3, seed=4, max_new_tokens=20))
    session = Session(engine.prefill("Then said", calibrate=False))
    before = []
    for rnd in engine.run():
        before.append(list(engine.ids))
        session.append(rnd)
    for i, rnd in enumerate(session.rounds):
        start = session.context_ids(i, 0)
        assert len(start) == rnd.context_len
        emitted = [t.id for t in rnd.tokens if t.emitted]
        assert before[i] == start + emitted


@pytest.mark.parametrize("packed", [False, True], ids=["w-xT", "packed"])
def test_fast_head_gives_the_same_logits_and_greedy_output(pair_dirs, monkeypatch, packed):
    """The large CPU head's W @ x^T, or with the loader's packed few-row products
    (core.models.packed_linear) in its place: the same logits to rounding, the same greedy
    text as the target's own generate."""
    from specviz.core.models import pair as models
    from specviz.core.models.packed_linear import ENV_SWITCH, PackedLinear, available

    if packed and not available():
        pytest.skip("packed only on x86-64 with oneDNN")
    monkeypatch.setattr(models, "LARGE_HEAD", 0)  # apply it to the small test head
    monkeypatch.setenv(ENV_SWITCH, "1" if packed else "0")
    fast = models.load_pair(str(pair_dirs[0]), str(pair_dirs[1]))
    head = fast.target.get_output_embeddings()
    if packed:
        assert type(head) is PackedLinear and "forward" not in vars(head)
    else:
        assert "forward" in vars(head)  # the instance's own forward: applied
    ids = torch.tensor([[5, 17, 42, 7, 99, 3]])
    with torch.inference_mode():
        hidden = torch.randn(2, 6, head.in_features)
        torch.testing.assert_close(head(hidden), torch.nn.functional.linear(hidden, head.weight))
    engine = SpeculativeEngine(fast, Settings(k=3, temperature=0, max_new_tokens=16))
    engine.prefill("", prompt_ids=ids[0].tolist(), calibrate=False)
    ours = [t.id for r in engine.run() for t in r.tokens if t.emitted]
    reference = fast.target.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=16,
        pad_token_id=fast.eos_token_id,
    )
    assert ours == reference[0, ids.shape[1] :].tolist()


def test_both_engines_speak_the_engine_protocol(pair):
    """The in-process engine and the remote client are one interface (core.engine.protocol):
    `run` and `run --connect` drive them through one loop."""
    from specviz.core.engine.protocol import Engine
    from specviz.core.host.session_host import SessionHost
    from specviz.remote.client import RemoteEngine

    assert isinstance(SessionHost(pair), Engine)
    names = [n for n in vars(Engine) if not n.startswith("_")]
    assert len(names) == 11 and all(callable(getattr(RemoteEngine, n, None)) for n in names)
    assert set(Engine.__annotations__) == {"header", "finished"}  # attributes of both
    local = SessionHost(pair)
    settings = Settings(k=2, seed=2, max_new_tokens=12, ignore_eos=True)
    local.start("The quick brown fox", settings, calibrate=False)
    local.step()
    with pytest.raises(ValueError, match="cannot continue: it has not ended"):
        local.continue_session(settings)
    rounds = list(local.run())
    assert rounds and local.pause() == [] and local.session.finish_reason == "max_new_tokens"
    local.continue_session(dataclasses.replace(settings, max_new_tokens=24))
    assert not local.session.finished and local.step().index == len(rounds) + 1
