"""The cost model: probes leave a session's tokens and times alone; the refined formula
matches a Monte Carlo of the rule; measured speedup, impossible values, the what-if."""

from __future__ import annotations

import dataclasses
import math
import time

import pytest
import torch

from specviz.core.decoding.verify import verify
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.engine.cost_probes import ProbePlan, Prober
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.metrics import costmodel
from specviz.core.metrics.costmodel import (
    CostModel,
    acceptance_for,
    expected_tokens,
    refined_speedup,
    theil_sen,
    whatif_acceptance,
)
from specviz.core.trace.records import Round, Settings, TokenEvent
from specviz.core.trace.rounds import with_extras


def make_round(index, fates, ms=10.0, k=None, probes=None, bonus=None):
    """A round whose judged positions have these fates (True = accepted)."""
    tokens = []
    for ok in fates:
        tokens.append(TokenEvent(id=1, text="a", status="accepted" if ok else "rejected"))
        if not ok:
            break
    n_acc = sum(1 for t in tokens if t.status == "accepted")
    k = k if k is not None else len(fates)
    tokens += [TokenEvent(id=2, text="d", status="discarded")] * (k - len(tokens))
    last = "bonus" if n_acc == k else "resampled"
    tokens.append(TokenEvent(id=3, text="b", status=bonus or last))
    return with_extras(
        Round("s", index, 10, ms / 2, ms / 2, k, n_acc, tuple(tokens)), probes=probes
    )


# --- the formulas --------------------------------------------------------------------------


def test_expected_tokens_closed_forms():
    assert expected_tokens([]) == 1
    assert expected_tokens([1, 1, 1]) == 4
    assert expected_tokens([0, 1, 1]) == 1
    a = 0.7
    geometric = (1 - a**5) / (1 - a)  # Leviathan's E for K = 4 and constant alpha
    assert expected_tokens([a] * 4) == pytest.approx(geometric)


@pytest.mark.parametrize("accept", [[0.9, 0.6, 0.3], [0.5, 0.5, 0.5, 0.5, 0.5], [0.95, 0.1]])
def test_refined_expectation_matches_monte_carlo_of_the_rule(accept):
    """The real verify() with p, q built so that position i is accepted with probability
    a_i: the mean emitted tokens per round equals E = 1 + sum_i prod_{j<=i} a_j."""
    k = len(accept)
    q = torch.zeros(k, 2)
    q[:, 0] = 1.0  # the draft always proposes token 0
    p = torch.zeros(k + 1, 2)
    p[:k, 0] = torch.tensor(accept)
    p[:k, 1] = 1 - p[:k, 0]  # p(0) / q(0) = a_i
    p[k] = 0.5
    tokens = torch.zeros(k, dtype=torch.long)
    gen = torch.Generator().manual_seed(7)
    n = 20000
    emitted = [verify(p, q, tokens, gen).n_accepted + 1 for _ in range(n)]
    mean = sum(emitted) / n
    sd = math.sqrt(sum((e - mean) ** 2 for e in emitted) / (n - 1))
    assert abs(mean - expected_tokens(accept)) < 4 * sd / math.sqrt(n)
    # And a wrong formula (constant alpha at the mean) is told apart where a_i vary.
    if len(set(accept)) > 1:
        flat = expected_tokens([sum(accept) / k] * k)
        assert abs(mean - flat) > 4 * sd / math.sqrt(n)


def test_refined_speedup_arithmetic():
    # E = 1 + .5 + .25 = 1.75; round = 2 * 1 + 12 + 1 = 15 ms; baseline 10 ms/token.
    assert refined_speedup([0.5, 0.5], 10.0, 1.0, 12.0, 1.0) == pytest.approx(1.75 * 10 / 15)


def test_acceptance_for_extrapolates_the_last_measured():
    assert acceptance_for([0.9, None, 0.5], 5, 0.7) == [0.9, 0.9, 0.5, 0.5, 0.5]
    assert acceptance_for([], 2, 0.7) == [0.7, 0.7]


def test_theil_sen_ignores_one_slow_point():
    points = [(n, 10 + 2 * n) for n in range(1, 10)] + [(5, 500.0)]
    intercept, slope = theil_sen(points)
    assert slope == pytest.approx(2.0) and intercept == pytest.approx(10.0)


# --- the model on round records -------------------------------------------------------------


def probe(t1=10.0, slope=2.0, draft=1.0, ns=range(1, 18), rule=None, steps=3):
    """A probe record: T_t(n) = t1 + slope (n - 1), `steps` timed T_t(1) steps of t1."""
    record = {
        "context_len": 10,
        "target_ms": [[n, t1 + slope * (n - 1)] for n in ns],
        "draft_ms": draft,
        "t1_ms": [t1] * steps,
    }
    if rule is not None:
        record["rule_ms"] = rule
    return record


def probed(rounds, **kw):
    """The first three rounds carry probes: nine T_t(1) steps, enough for a baseline."""
    return [with_extras(r, probes=probe(**kw)) if i < 3 else r for i, r in enumerate(rounds)]


def test_measured_speedup_is_baseline_times_tokens_over_round_time():
    rounds = probed(
        [make_round(i, [True, True, False, False], ms=20.0) for i in range(10)], rule=2.0
    )
    fig = costmodel.figures(rounds)
    # 3 tokens a round, 20 ms a round, baseline 10 ms/token -> 1.5x, nothing noisy
    assert fig.speedup_measured == pytest.approx(1.5)
    assert fig.speedup.interval == pytest.approx((1.5, 1.5)) and fig.speedup.status == "ok"
    assert not fig.impossible
    assert fig.alpha == pytest.approx(2 / 3)
    assert fig.acceptance_by_position == (1.0, 1.0, 0.0)
    # o is the probes' rule time: 4 x T_d(1) + T_t(5) + o = 4 + 18 + 2
    assert fig.costs.overhead(4) == pytest.approx(2.0)
    assert fig.speedup_refined == pytest.approx(3 * 10 / 24)
    assert fig.refined_ratio == pytest.approx(1.5 / (30 / 24))


def test_the_refined_prediction_takes_no_round_time():
    """Measured / refined is a test only if the prediction does not restate the rounds."""
    fast = probed([make_round(i, [True, True, False, False], ms=20.0) for i in range(10)], rule=2.0)
    slow = [
        dataclasses.replace(r, draft_ms=r.draft_ms * 3, verify_ms=r.verify_ms * 3) for r in fast
    ]
    a, b = costmodel.figures(fast), costmodel.figures(slow)
    assert a.speedup_refined == pytest.approx(b.speedup_refined)
    assert b.speedup_measured == pytest.approx(a.speedup_measured / 3)


def test_a_probe_without_a_rule_time_predicts_without_overhead():
    rounds = probed([make_round(i, [True, True, False, False], ms=20.0) for i in range(10)])
    assert costmodel.figures(rounds).costs.overhead(4) == 0.0


def test_impossible_speedup_is_flagged():
    # K = 1: at most 2 tokens per round; a probe that says the target costs 100 ms a token
    # while rounds of 2 tokens take 10 ms claims 20x.
    rounds = probed([make_round(i, [True], ms=10.0) for i in range(5)], t1=100.0)
    fig = costmodel.figures(rounds)
    assert fig.speedup.value == pytest.approx(20.0) and fig.speedup_measured is None
    assert fig.impossible


def test_running_medians_resist_slow_probes():
    model = CostModel(probe_window=5)
    for i in range(5):
        slow = i == 2
        model.add(make_round(i, [True], probes=probe(t1=1000.0 if slow else 10.0)))
    assert model.costs().t_target(1) == pytest.approx(10.0)


def test_the_baseline_is_never_extrapolated():
    """Two probes' steps are too few: no T_t(1) (not a line through T_t(n > 1))."""
    model = CostModel()
    for i in range(2):
        model.add(make_round(i, [True], probes=probe()))
    assert model.costs().t_target(1) is None and model.costs().t_target(5) == pytest.approx(18)
    assert model.figures().speedup.status == "measuring"
    model.add(make_round(2, [True], probes=probe()))
    assert model.costs().t_target(1) == pytest.approx(10.0)


def test_advisor_curve_peaks_where_costs_and_acceptance_say():
    # High acceptance and a cheap draft: the curve rises, then flattens as T_t(K+1) grows.
    rounds = probed([make_round(i, [True] * 4, ms=20.0) for i in range(20)], slope=0.0, draft=0.5)
    fig = costmodel.figures(rounds)
    ks = [k for k, _ in fig.curve]
    assert ks == list(range(1, 17))
    assert fig.best_k == 16  # every draft accepted, a pass over n costs the same
    rounds = probed([make_round(i, [True, False], k=4, ms=20.0) for i in range(20)], slope=3.0)
    assert costmodel.figures(rounds).best_k <= 2  # a_2 = 0: drafting beyond 1 is waste


def test_whatif_from_the_first_judged_positions():
    rounds = [
        make_round(0, [True, True, True, False]),  # K'=2: 2 accepted, bonus -> 3 tokens
        make_round(1, [True, False, False, False]),  # K'=2: 1 accepted -> 2 tokens
        make_round(2, [False, False, False, False]),  # 0 accepted -> 1 token
    ]
    w = whatif_acceptance(rounds, 2)
    assert w["estimate"] is True
    assert w["acceptance"] == pytest.approx(3 / 5)  # judged 2 + 2 + 1
    assert w["tokens_per_round"] == pytest.approx(2.0)
    assert w["acceptance_by_position"] == [pytest.approx(2 / 3), pytest.approx(1 / 2)]


# --- the probes on a real engine ------------------------------------------------------------


def emitted(rounds):
    return [t.id for r in rounds for t in r.tokens if t.emitted]


@pytest.mark.parametrize(
    "temperature, drafter",
    [(1.0, "model"), (0.0, "model"), (1.0, "lookup"), (1.0, "early-exit")],
)
def test_probes_do_not_change_the_tokens(pair, temperature, drafter):
    settings = Settings(k=3, temperature=temperature, seed=5, max_new_tokens=40)
    config = DrafterConfig(drafter, exit_layer=1 if drafter == "early-exit" else None)
    plain = SpeculativeEngine(pair, settings, trace=False, drafter=config)
    plain.prefill("In the beginning God", calibrate=False)
    without = list(plain.run())
    probed = SpeculativeEngine(
        pair, settings, trace=False, drafter=config, prober=Prober(ProbePlan(every=1, budget=None))
    )
    probed.calibration_tokens = 1
    probed.prefill("In the beginning God")
    with_probes = list(probed.run())
    assert all(r.probes is None for r in without)
    assert all(r.probes for r in with_probes[:-1])  # every round (the last may lack room)
    assert emitted(with_probes) == emitted(without)
    # The same figures to the last bit: p, q, accept_prob, u of every token.
    assert [r.tokens for r in with_probes] == [r.tokens for r in without]
    first = with_probes[0].probes
    assert [n for n, _ in first.target_ms] == list(range(1, 18))
    assert first.context_len == with_probes[0].context_len + with_probes[0].n_emitted


def test_probes_leave_the_caches_as_found(pair):
    engine = SpeculativeEngine(pair, Settings(k=4, seed=2, max_new_tokens=30), trace=False)
    engine.prefill("A fool and his money", calibrate=False)
    list(engine.run(max_rounds=3))
    before = (engine.t_cache.get_seq_length(), engine.d_cache.get_seq_length())
    record = engine.prober.probe(engine, full=True)
    assert (engine.t_cache.get_seq_length(), engine.d_cache.get_seq_length()) == before
    assert record["draft_ms"] > 0 and all(ms > 0 for _, ms in record["target_ms"])


def test_probes_are_not_in_the_rounds_times(pair, monkeypatch):
    """A probe that takes 1000 s on the engine's clock: no round's time includes it."""
    import specviz.core.engine.clock as clock_module
    import specviz.core.engine.cost_probes as probes_module
    import specviz.core.engine.round_step as engine_module

    skew = [0.0]

    class Clock:
        @staticmethod
        def perf_counter():
            return time.perf_counter() + skew[0]

    real = probes_module.forward

    def slow_forward(*args, **kwargs):
        skew[0] += 1000.0
        return real(*args, **kwargs)

    monkeypatch.setattr(engine_module, "time", Clock)
    monkeypatch.setattr(clock_module, "time", Clock)  # the clock of the rounds' phases
    monkeypatch.setattr(probes_module, "forward", slow_forward)
    engine = SpeculativeEngine(
        pair,
        Settings(k=3, seed=1, max_new_tokens=30),
        prober=Prober(ProbePlan(every=1, budget=None)),
    )
    engine.calibration_tokens = 1
    engine.prefill("The quick brown fox")
    rounds = list(engine.run())
    assert skew[0] > 0 and sum(1 for r in rounds if r.probes) >= 2
    assert all(r.draft_ms < 100_000 and r.verify_ms < 100_000 for r in rounds)


def test_sessions_that_do_not_calibrate_do_not_probe(pair):
    engine = SpeculativeEngine(pair, Settings(k=2, seed=1, max_new_tokens=10), trace=False)
    engine.prefill("A fool", calibrate=False)
    assert all(r.probes is None for r in engine.run())


def test_capped_ms_counts_a_burst_at_three_medians():
    rounds = [(4, 10.0)] * 9 + [(4, 1000.0), (2, 6.0)]
    assert costmodel.capped_ms(rounds) == [10.0] * 9 + [30.0, 6.0]


def test_remeasure_asks_for_a_full_probe_after_the_next_round(pair):
    engine = SpeculativeEngine(
        pair,
        Settings(k=2, seed=1, max_new_tokens=40),
        trace=False,
        prober=Prober(ProbePlan(every=100, warmup=0)),
    )
    engine.prefill("A fool and his", calibrate=False)
    engine.probing = True
    first, second = engine.step(), engine.step()
    assert len(first.probes.target_ms) == 17 and second.probes is None
    engine.prober.request_full()
    third, fourth = engine.step(), engine.step()
    assert [n for n, _ in third.probes.target_ms] == list(range(1, 18))
    assert fourth.probes is None


def test_the_first_rounds_measure_the_baseline_from_many_steps(pair):
    """A short session has a baseline from the first rounds on: the full probe and the
    warm-up's probes of T_t(1) alone, every timed step recorded."""
    engine = SpeculativeEngine(pair, Settings(k=2, seed=1, max_new_tokens=40), trace=False)
    engine.prefill("A fool and his")
    rounds = [engine.step() for _ in range(4)]
    steps = [len(r.probes.t1_ms) for r in rounds]
    assert steps == [3, 3, 3, 3]
    assert [sorted(dict(r.probes.target_ms)) for r in rounds[1:]] == [[1]] * 3
    assert rounds[0].probes.rule_ms > 0
    model = CostModel().extend(rounds)
    assert model.figures().speedup.steps == 12 and model.costs().t_target(1) is not None


def test_probes_keep_to_their_share_of_the_time(monkeypatch):
    import specviz.core.engine.cost_probes as probes_module

    now = [100.0]
    monkeypatch.setattr(probes_module.time, "perf_counter", lambda: now[0])
    prober = Prober(ProbePlan(every=2, budget=0.5, warmup=3))
    prober._last_round, prober._last_end, prober._last_cost = 4, 100.0, 1.0
    assert prober.due(0)  # the first round always
    assert prober.due(1) and prober.due(3)  # and the warm-up's baseline probes
    now[0] = 101.0  # 1 s since a 1 s probe: 50% would go to probing
    assert not prober.due(6)
    now[0] = 102.5
    assert prober.due(6) and not prober.due(5)  # and at least `every` rounds apart
    prober.request_full()
    assert prober.due(5)


def test_the_baseline_probe_times_decoding_steps_as_decode_runs_them(pair, monkeypatch):
    """T_t(1) is what target-only decoding costs per token: decode()'s own step (forward,
    warp, sample), each fed the token the last one sampled, on a cache that grows (not one
    pass repeated on a cache cropped back in between), one step per timed span and nothing
    else in it (no crop, no setup), before any draft pass. A fake clock that only the step's
    parts advance."""
    from transformers import DynamicCache

    import specviz.core.decoding.forward as decode_module
    import specviz.core.drafters.draft_model as draft_model
    import specviz.core.engine.cost_probes as probes_module

    engine = SpeculativeEngine(pair, Settings(k=3, seed=1, max_new_tokens=30), trace=False)
    engine.prefill("A fool and his money", calibrate=False)
    list(engine.run(max_rounds=2))
    t_len = engine.t_cache.get_seq_length()
    now, fed, picked, passes = [0.0], [], [], []
    real_forward, real_warp, real_pick = (
        decode_module.forward,
        decode_module.warp,
        decode_module.pick,
    )
    real_pass = probes_module.forward
    real_crop = DynamicCache.crop

    def forward(model, tokens, cache, vocab, keep):
        fed.append((list(tokens), cache.get_seq_length()))
        passes.append("step")
        now[0] += 2.0
        return real_forward(model, tokens, cache, vocab, keep)

    def other_pass(model, *args, **kwargs):
        passes.append("draft" if model is pair.draft else "target")
        return real_pass(model, *args, **kwargs)

    def warp(logits, config):
        now[0] += 0.5
        return real_warp(logits, config)

    def pick(logits, config, generator):
        picked.append(real_pick(logits, config, generator))
        return picked[-1]

    def crop(cache, n):
        now[0] += 100.0
        return real_crop(cache, n)

    class Clock:
        @staticmethod
        def perf_counter():
            return now[0] / 1000

    monkeypatch.setattr(decode_module, "forward", forward)
    monkeypatch.setattr(decode_module, "warp", warp)
    monkeypatch.setattr(decode_module, "pick", pick)
    monkeypatch.setattr(DynamicCache, "crop", crop)
    monkeypatch.setattr(probes_module, "time", Clock)
    monkeypatch.setattr(probes_module, "forward", other_pass)
    monkeypatch.setattr(draft_model, "time", Clock)  # the draft times its own step
    monkeypatch.setattr(draft_model, "forward", other_pass)
    record = engine.prober.probe(engine)
    assert dict(record["target_ms"])[1] == pytest.approx(2.5)  # forward + warp, once
    steps = engine.prober.plan.repeats + 1
    # First, right after the round's own target pass: timed after the draft's passes, the
    # target's first steps are slower (its weights are no longer in the CPU caches).
    assert passes[:steps] == ["step"] * steps and "draft" in passes[steps:]
    assert [length for _, length in fed] == [t_len + i for i in range(steps)]
    assert [tokens for tokens, _ in fed[1:]] == [[t] for t in picked[:-1]]
    assert engine.t_cache.get_seq_length() == t_len
