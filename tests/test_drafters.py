"""Each drafter and policy is exact: greedy output equals the target's own greedy decoding,
the emitted tokens follow p (chi-square on whole sequences at a fixed seed and level), the
caches equal a fresh forward after mixed rounds; and each records what the window needs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from specviz.core.decoding import forward as decode_module
from specviz.core.decoding.k_policy import PolicyConfig
from specviz.core.decoding.kv_cache import crop_layers
from specviz.core.decoding.warp import SamplingConfig, warp
from specviz.core.drafters.early_exit import first_layers
from specviz.core.drafters.prompt_lookup import LookupDrafter
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.models.pair import ModelPair
from specviz.core.trace.records import STOP_REASONS, ModelInfo, Settings
from tests.test_sampling import LEVEL, chi2_pvalue

LOOKUP = DrafterConfig("lookup", ngram_max=3)
EARLY = DrafterConfig("early-exit", exit_layer=1)
MODEL = DrafterConfig("model")
CONSTANT, HEURISTIC = PolicyConfig("constant"), PolicyConfig("heuristic")
THRESHOLD = PolicyConfig("threshold", threshold=0.5)
# Prompts that repeat themselves, so that a lookup finds something to copy.
PROMPTS = ["the cat and the dog and the cat and the", "A fool and his money. A fool and his"]
COMBOS = [
    (MODEL, HEURISTIC),
    (MODEL, THRESHOLD),
    (LOOKUP, CONSTANT),
    (LOOKUP, HEURISTIC),
    (EARLY, CONSTANT),
    (EARLY, THRESHOLD),
]
IDS = [f"{d.kind}-{p.kind}" for d, p in COMBOS]


def target_only(pair) -> ModelPair:
    """The pair without its draft model: what `--drafter lookup|early-exit` loads."""
    return dataclasses.replace(pair, draft=None, draft_info=None)


def greedy_reference(model, ids, n, eos):
    ids_t = torch.tensor([ids])
    out = model.generate(
        ids_t, attention_mask=torch.ones_like(ids_t), do_sample=False, max_new_tokens=n,
        pad_token_id=eos,
    )  # fmt: skip
    return out[0, len(ids) :].tolist()


@pytest.mark.parametrize("drafter,policy", COMBOS, ids=IDS)
def test_greedy_equals_target_generate(pair, drafter, policy):
    used = pair if drafter.kind == "model" else target_only(pair)
    for prompt in PROMPTS:
        engine = SpeculativeEngine(
            used, Settings(k=3, temperature=0, max_new_tokens=20), drafter=drafter, policy=policy
        )
        header = engine.prefill(prompt, calibrate=False)
        rounds = list(engine.run())
        ours = [t.id for r in rounds for t in r.tokens if t.emitted]
        assert ours == greedy_reference(pair.target, list(header.prompt_ids), 20, pair.eos_token_id)
        assert header.drafter["kind"] == drafter.kind and header.policy["kind"] == policy.kind
        for rnd in rounds:
            assert rnd.stop in STOP_REASONS and rnd.k >= 1 and rnd.n_drafted <= rnd.k


# Flatter than the models' own distributions, so that many sequences are likely and the
# chi-square test below has power (it catches a wrong residual at N_RUNS).
TEMPERATURE = 1.5


def run_sequences(
    pair, drafter, policy, k, n_runs, n_tokens, prompt_ids, seed, verifier: str = "token",
    sampling: SamplingConfig | None = None,
):  # fmt: skip
    """n_runs sessions of n_tokens from one prompt, sampled at TEMPERATURE (or `sampling`)
    with one running generator: the emitted sequences and every status seen."""
    s = sampling or SamplingConfig(temperature=TEMPERATURE)
    engine = SpeculativeEngine(
        pair,
        Settings(
            k=k,
            temperature=s.temperature,
            top_k=s.top_k,
            top_p=s.top_p,
            max_new_tokens=n_tokens,
            verifier=verifier,
        ),  # fmt: skip
        trace=False,
        drafter=drafter,
        policy=policy,
    )
    gen = torch.Generator().manual_seed(seed)
    sequences, statuses = [], []
    for _ in range(n_runs):
        engine.prefill("", prompt_ids=prompt_ids, calibrate=False)
        engine.generator = gen
        rounds = list(engine.run())
        sequences.append(tuple(t.id for r in rounds for t in r.tokens if t.emitted))
        statuses.append([t.status for r in rounds for t in r.tokens])
    return sequences, statuses


def sequence_pvalue(pair, prompt_ids, sequences, sampling: SamplingConfig | None = None):
    """Whether every emitted token follows the target's p given the tokens before it.

    Each token t at each position is mapped to u = F(t - 1) + w p(t), w ~ U[0, 1) (the
    randomised probability integral transform, with F the CDF of p(. | prefix) from a fresh
    forward): if t ~ p then u ~ U[0, 1), independently at every position. The u are pooled
    and a chi-square test over 10 equal bins checks that they are uniform."""
    config = sampling or SamplingConfig(temperature=TEMPERATURE)
    rng = np.random.default_rng(0)
    cdfs: dict[tuple[int, ...], np.ndarray] = {}
    draws = []
    for seq in sequences:
        for i, t in enumerate(seq):
            prefix = seq[:i]
            if prefix not in cdfs:
                with torch.inference_mode():
                    ids = torch.tensor([prompt_ids + list(prefix)])
                    logits = pair.target(input_ids=ids).logits[0, -1, : pair.vocab_size]
                cdfs[prefix] = np.concatenate([[0.0], warp(logits, config).double().cumsum(0)])
            cdf = cdfs[prefix]
            draws.append(cdf[t] + rng.random() * (cdf[t + 1] - cdf[t]))
    counts = np.bincount(np.minimum((np.array(draws) * 10).astype(int), 9), minlength=10)
    return chi2_pvalue(counts, np.full(10, 0.1))


N_RUNS = 400


def looping_prompt(pair) -> list[int]:
    """A prompt followed by the target's own greedy continuation: the small random target
    repeats itself, so a lookup finds spans the target is likely to accept."""
    ids = pair.tokenizer(PROMPTS[0])["input_ids"]
    return ids + greedy_reference(pair.target, ids, 8, pair.eos_token_id)


@pytest.mark.parametrize("drafter,policy", COMBOS, ids=IDS)
def test_emitted_sequences_follow_p(pair, drafter, policy):
    """Short sessions from one prompt (K = 1, or 2 where the threshold can stop a round
    early): tokens emitted after an acceptance, after a rejection (in the next round) and
    after a bonus all occur, and whole sequences follow the target's p jointly."""
    used = pair if drafter.kind == "model" else target_only(pair)
    prompt_ids = looping_prompt(pair)
    k, n_tokens = (2, 4) if policy.kind == "threshold" else (1, 3)
    sequences, statuses = run_sequences(
        used, drafter, policy, k, N_RUNS, n_tokens, prompt_ids, seed=1
    )
    flat = {s for run in statuses for s in run}
    assert {"accepted", "rejected", "resampled", "bonus"} <= flat, flat
    after_bonus = sum(run.index("bonus") < len(run) - 1 for run in statuses if "bonus" in run)
    assert after_bonus > N_RUNS // 20  # a token emitted after a bonus, in the next round
    assert sequence_pvalue(pair, prompt_ids, sequences) > LEVEL


def test_the_sequence_test_rejects_a_wrong_rule(pair, monkeypatch):
    """Power: the same test, at the same size, catches resampling from p instead of the
    residual (with a one-hot q the residual is p without the drafted x; p lets x back in)."""
    from specviz.core.decoding import verify as sampling

    monkeypatch.setattr(
        sampling, "residual_distribution", lambda p, q: p.double() / p.double().sum()
    )
    prompt_ids = looping_prompt(pair)
    used = target_only(pair)
    sequences, _ = run_sequences(used, LOOKUP, CONSTANT, 1, N_RUNS, 3, prompt_ids, seed=1)
    assert sequence_pvalue(pair, prompt_ids, sequences) < LEVEL


def lookup_sequences(pair, verifier: str) -> tuple[list[int], list[tuple[int, ...]]]:
    """Where a lossy rule shows in the end-to-end test: prompt lookup (a one-hot q) on the
    target alone, K 2, N_RUNS sessions of 4 tokens from the looping prompt (seed 3), under
    `verifier`: (the prompt's ids, the emitted sequences) for sequence_pvalue. The lossy rules'
    tests (tests/test_typical.py, tests/test_lenient.py) show them failing it here."""
    from specviz.core.decoding.k_policy import PolicyConfig

    prompt_ids = looping_prompt(pair)
    sequences = run_sequences(target_only(pair), LOOKUP, PolicyConfig(), 2, N_RUNS, 4,
                              prompt_ids, seed=3, verifier=verifier)[0]  # fmt: skip
    return prompt_ids, sequences


def fresh_logits(model, ids, vocab):
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0, -1, :vocab]


def probe(model, cache, ids, vocab, n_layers=None):
    """Logits after ids from the cache (fed what it lacks), then the cache (its first
    n_layers, or all) restored."""
    cached_len = cache.get_seq_length()
    with torch.inference_mode():
        out = decode_module.forward(model, ids[cached_len:], cache, vocab, 1)[0]
    crop_layers(cache, n_layers or len(cache.layers), cached_len)
    return out


@pytest.mark.parametrize("drafter", [LOOKUP, EARLY], ids=["lookup", "early-exit"])
def test_caches_equal_a_fresh_forward_after_mixed_rounds(pair, drafter):
    used = target_only(pair)
    engine = SpeculativeEngine(
        used, Settings(k=4, seed=3, max_new_tokens=60), drafter=drafter, policy=HEURISTIC
    )
    engine.prefill(PROMPTS[1], calibrate=False)
    statuses = set()
    for rnd in engine.run(max_rounds=15):
        statuses.update(t.status for t in rnd.tokens)
        ids = list(engine.ids)
        assert engine.t_cache.get_seq_length() == len(ids) - 1
        cached = probe(pair.target, engine.t_cache, ids, pair.vocab_size)
        fresh = fresh_logits(pair.target, ids, pair.vocab_size)
        torch.testing.assert_close(cached, fresh, atol=1e-4, rtol=1e-4)
        if drafter.kind == "early-exit":
            # Every layer has the same length again: the draft's appends were cropped.
            lengths = {layer.get_seq_length() for layer in engine.t_cache.layers}
            assert lengths == {len(ids) - 1}
            with first_layers(pair.target, 1) as draft:
                cached = probe(draft, engine.t_cache, ids, pair.vocab_size, n_layers=1)
                fresh = fresh_logits(draft, ids, pair.vocab_size)
            torch.testing.assert_close(cached, fresh, atol=1e-4, rtol=1e-4)
        if engine.finished:
            break
    assert {"accepted", "rejected", "resampled"} <= statuses


def test_early_exit_drafts_with_the_first_layers(pair):
    """The q of each drafted token is the warped output of the target cut after layer L
    (its final norm and head kept), on the whole context."""
    engine = SpeculativeEngine(
        target_only(pair), Settings(k=3, seed=5, max_new_tokens=12), drafter=EARLY
    )
    header = engine.prefill(PROMPTS[0], calibrate=True)
    assert header.draft_ms_per_token > 0
    assert header.drafter == {"kind": "early-exit", "exit_layer": 1, "n_layers": 2}
    assert header.draft.params < header.target.params
    ids = list(header.prompt_ids)
    n_layers = len(pair.target.transformer.h)
    for rnd in engine.run():
        context = ids[: rnd.context_len] if len(ids) >= rnd.context_len else None
        for t in rnd.tokens:
            if t.status in ("accepted", "rejected"):
                with first_layers(pair.target, 1) as draft:
                    q = warp(fresh_logits(draft, context, pair.vocab_size), SamplingConfig())
                assert t.q == pytest.approx(float(q[t.id]), abs=1e-5)
            if t.status == "accepted":
                context = context + [t.id]
        ids = list(engine.ids)
    assert len(pair.target.transformer.h) == n_layers  # the full model is back


def tiny_llama(pair) -> ModelPair:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=pair.vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        eos_token_id=pair.eos_token_id, bos_token_id=pair.eos_token_id,
        pad_token_id=pair.eos_token_id,
    )  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)  # sharp enough for acceptance and rejection both
    n = sum(p.numel() for p in model.parameters())
    info = ModelInfo("tiny-llama", "", pair.vocab_size, n, "float32", "cpu")
    return ModelPair(model, None, pair.tokenizer, info, None, pair.vocab_size, pair.device)


def test_early_exit_on_a_llama_layout(pair):
    llama = tiny_llama(pair)
    drafter = DrafterConfig("early-exit", exit_layer=2)
    engine = SpeculativeEngine(
        llama, Settings(k=3, temperature=0, max_new_tokens=16), drafter=drafter
    )
    header = engine.prefill(PROMPTS[1], calibrate=False)
    ours = [t.id for r in engine.run() for t in r.tokens if t.emitted]
    ids = list(header.prompt_ids)
    assert ours == greedy_reference(llama.target, ids, 16, pair.eos_token_id)
    # Sampled rounds: the shared cache still equals a fresh forward, for both models.
    engine = SpeculativeEngine(llama, Settings(k=3, seed=2, max_new_tokens=40), drafter=drafter)
    engine.prefill(PROMPTS[1], calibrate=False)
    for _ in engine.run(max_rounds=8):
        ids = list(engine.ids)
        cached = probe(llama.target, engine.t_cache, ids, pair.vocab_size)
        torch.testing.assert_close(
            cached, fresh_logits(llama.target, ids, pair.vocab_size), atol=1e-4, rtol=1e-4
        )
        with first_layers(llama.target, 2) as draft:
            cached = probe(draft, engine.t_cache, ids, pair.vocab_size, n_layers=2)
            fresh = fresh_logits(draft, ids, pair.vocab_size)
        torch.testing.assert_close(cached, fresh, atol=1e-4, rtol=1e-4)


def test_unsupported_drafters_are_refused_clearly(pair):
    with pytest.raises(ValueError, match="between 1 and 1"):
        SpeculativeEngine(
            target_only(pair), Settings(), drafter=DrafterConfig("early-exit", exit_layer=2)
        )
    with pytest.raises(ValueError, match="needs a draft model"):
        SpeculativeEngine(target_only(pair), Settings(), drafter=MODEL)
    with pytest.raises(ValueError, match="unknown drafter"):
        SpeculativeEngine(pair, Settings(), drafter=DrafterConfig("medusa"))
    with pytest.raises(ValueError, match="unknown policy"):
        SpeculativeEngine(pair, Settings(), policy=PolicyConfig("greedy-k"))
    with pytest.raises(ValueError, match="threshold"):
        SpeculativeEngine(pair, Settings(), policy=PolicyConfig("threshold", threshold=1.5))

    class Odd(torch.nn.Module):  # no layer list transformers' families use
        config = type("C", (), {"is_encoder_decoder": False})()
        base_model_prefix = "body"

        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Linear(2, 2))

    odd = dataclasses.replace(target_only(pair), target=Odd())
    with pytest.raises(ValueError, match="early exit is not supported for Odd"):
        SpeculativeEngine(odd, Settings(), drafter=EARLY)


def test_lookup_matches_transformers_prompt_lookup():
    from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

    rng = np.random.default_rng(0)
    info = ModelInfo("lookup", "", 6, 0, "float32", "cpu")
    for ngram_max in (1, 2, 3):
        ours = LookupDrafter(ngram_max, info, vocab=6, eos=None)
        for _ in range(200):
            ids = rng.integers(0, 6, size=int(rng.integers(2, 30))).tolist()
            k = int(rng.integers(1, 6))
            theirs = PromptLookupCandidateGenerator(
                num_output_tokens=k, max_matching_ngram_size=ngram_max, max_length=1000
            )
            candidates, _ = theirs.get_candidates(torch.tensor([ids]))
            expected = candidates[0, len(ids) :].tolist()
            proposal = ours.propose(ids, k, SamplingConfig(), None, None)
            assert proposal.tokens == expected, (ids, k)
            if expected:
                start, end = proposal.extras["copied_from"]
                assert ids[start:end] == expected
                q = proposal.q_rows(6)  # [k, V]
                assert q.sum(1).tolist() == [1.0] * len(expected)  # one-hot
            assert proposal.stop == ("k" if len(expected) == k else "no_match")


def test_lookup_records_copied_spans_and_no_match(pair):
    engine = SpeculativeEngine(
        target_only(pair), Settings(k=4, seed=0, max_new_tokens=30), drafter=LOOKUP
    )
    header = engine.prefill(PROMPTS[0], calibrate=True)
    assert header.drafter == {"kind": "lookup", "ngram_max": 3}
    assert header.draft.params == 0 and header.draft_ms_per_token >= 0
    rounds = list(engine.run())
    ids = list(engine.ids)
    copied = [r for r in rounds if r.copied_from is not None]
    assert copied  # the prompt repeats itself
    for r in copied:
        start, end = r.copied_from
        assert end <= r.context_len and end - start == r.n_drafted
        assert [t.id for t in r.tokens[: r.n_drafted]] == ids[start:end]
        assert all(t.q == 1.0 for t in r.tokens[: r.n_drafted])  # one-hot q
    for r in rounds:
        if r.copied_from is None:
            assert r.n_drafted == 0 and r.stop in ("no_match", "limit")


def test_heuristic_and_threshold_policies_record_k_and_stop(pair):
    engine = SpeculativeEngine(
        pair, Settings(k=3, seed=4, max_new_tokens=200), trace=False, policy=HEURISTIC
    )
    header = engine.prefill(PROMPTS[1], calibrate=False)
    assert header.policy == {"kind": "heuristic"}
    rounds = list(engine.run(max_rounds=40))
    assert rounds[0].k == 3
    for before, after in zip(rounds, rounds[1:], strict=False):
        if after.stop == "limit" or before.finish_reason:
            break
        full = before.n_drafted > 0 and before.n_accepted == before.n_drafted
        assert after.k == (min(before.k + 2, 32) if full else max(1, before.k - 1))
    assert len({r.k for r in rounds}) > 2  # it moved both ways

    engine = SpeculativeEngine(
        pair, Settings(k=6, seed=4, max_new_tokens=200), trace=False, policy=THRESHOLD
    )
    header = engine.prefill(PROMPTS[1], calibrate=False)
    assert header.policy == {"kind": "threshold", "threshold": 0.5}
    rounds = list(engine.run(max_rounds=30))
    assert all(r.k == 6 for r in rounds)
    stopped = [r for r in rounds if r.stop == "threshold"]
    assert stopped and all(r.n_drafted < 6 for r in stopped)
    for r in stopped:  # the last drafted token is the one the draft was unsure of
        last = r.tokens[r.n_drafted - 1]
        assert last.q < 0.5
        assert all(t.q >= 0.5 for t in r.tokens[: r.n_drafted - 1])
    assert {r.stop for r in rounds} <= {"k", "eos", "threshold", "limit"}


def test_a_lookup_session_round_trips_through_a_trace(pair, tmp_path):
    from specviz.core.trace.check_session import check_session
    from specviz.core.trace.files import load, save
    from specviz.core.trace.session import Session
    from tests.fixtures import all_details

    engine = SpeculativeEngine(
        target_only(pair), Settings(k=4, seed=1, max_new_tokens=20), drafter=LOOKUP,
        policy=HEURISTIC,
    )  # fmt: skip
    session = Session(engine.prefill(PROMPTS[0], calibrate=False))
    for rnd in engine.run():
        session.append(rnd)
    save(session, tmp_path / "t.jsonl")
    loaded = load(tmp_path / "t.jsonl")
    assert loaded.header.drafter == session.header.drafter
    assert loaded.header.policy == session.header.policy
    assert [r.copied_from for r in loaded.rounds] == [r.copied_from for r in session.rounds]
    assert [(r.k, r.stop) for r in loaded.rounds] == [(r.k, r.stop) for r in session.rounds]
    assert all_details(loaded) == list(session.rounds)
    assert check_session(loaded) == []  # the format's invariants hold for a lookup drafter


def test_changing_k_restarts_the_heuristic(pair):
    engine = SpeculativeEngine(
        pair, Settings(k=2, seed=0, max_new_tokens=100), trace=False, policy=HEURISTIC
    )
    engine.prefill(PROMPTS[1], calibrate=False)
    for _ in range(4):
        engine.step()
    engine.update_settings(dataclasses.replace(engine.settings, k=7))
    assert engine.step().k == 7


def test_the_lab_shows_the_q_an_early_exit_round_drew_from(pair):
    """The lab's position in an early-exit session is the session's drafter's q (the
    target's first layers), not the separate draft model's."""
    from specviz.core.lab.position import position_distributions

    used = target_only(pair)
    engine = SpeculativeEngine(used, Settings(k=2, seed=3, max_new_tokens=8), drafter=EARLY)
    engine.prefill(PROMPTS[0], calibrate=False)
    context = list(engine.ids)
    rnd = engine.step()
    first = rnd.tokens[0]
    pos = position_distributions(used, context, rnd.settings, drafter=engine.drafter)
    assert pos.q[first.id] == pytest.approx(first.q, rel=1e-5)
    model_q = position_distributions(pair, context, rnd.settings).q[first.id]
    assert model_q != pytest.approx(first.q, rel=1e-3)  # the draft model's is another q
    lookup = SpeculativeEngine(used, Settings(k=2, seed=3), drafter=LOOKUP).drafter
    copied = position_distributions(used, context, rnd.settings, drafter=lookup)
    assert copied.q.max() == 1.0 and copied.q.sum() == 1.0  # one-hot: nothing is drawn
