"""Block verification (core.decoding.block) and the lab on sequences (core.lab.sequence):
the paper's example kept-token counts, losslessness by a chi-square test at the lab's level,
the wrong variants and the lossy typical rule shown failing it, greedy equal to token-wise."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from specviz.cli.main import main
from specviz.core.decoding.block import block_numbers, verify_block
from specviz.core.decoding.verify import verify
from specviz.core.lab.sequence import compare, run_rule, shared_draws
from specviz.core.trace.rounds import with_extras
from tests.test_sampling import LEVEL, chi2_pvalue

PAPER_P, PAPER_Q = (1 / 3, 2 / 3), (2 / 3, 1 / 3)  # Sun et al.'s example, K = 2
ROUNDS = 300_000


@pytest.fixture(scope="module")
def paper():
    return {r.rule: r for r in compare(PAPER_P, PAPER_Q, 2, ROUNDS, seed=0)}


def test_the_papers_example_keeps_10_9_and_11_9(paper):
    """Token-wise keeps alpha + alpha^2 = 10/9 drafts a round, block 11/9 (each within 0.015
    at 300k rounds, the issue's figures)."""
    assert paper["token"].mean_accepted == pytest.approx(10 / 9, abs=0.015)
    assert paper["block"].mean_accepted == pytest.approx(11 / 9, abs=0.015)
    lo, hi = paper["block"].mean_accepted_ci
    assert lo > paper["token"].mean_accepted_ci[1]  # more, beyond both intervals


def test_block_and_token_follow_p_and_the_lossy_and_wrong_rules_do_not(paper):
    assert paper["token"].p_value > 1e-3 and paper["block"].p_value > 1e-3
    assert paper["typical"].p_value < 1e-6 and paper["typical"].tv > 0.1
    assert paper["token-block-residual"].p_value < 1e-6


def test_block_with_the_token_residual_is_wrong_where_the_residuals_differ(paper):
    """On the paper's example the block only ever stops early at p_i = 1 (then both residuals
    are norm(max(0, P - Q))), so that wrong variant cannot show there; where a block stops
    at p_i < 1 with mass left, it fails."""
    assert paper["block-token-residual"].mean_accepted == paper["block"].mean_accepted
    p, q = (0.4, 0.4, 0.2), (0.05, 0.25, 0.7)
    results = {r.rule: r for r in compare(p, q, 2, ROUNDS, seed=2)}
    assert results["block"].p_value > 1e-3 and results["token"].p_value > 1e-3
    assert results["block-token-residual"].p_value < 1e-6
    assert results["block"].mean_accepted > results["token"].mean_accepted


@pytest.mark.parametrize("k", [1, 3, 5])
def test_block_is_lossless_on_random_pairs(k):
    rng = np.random.default_rng(k)
    p, q = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5) * 0.5)
    result = run_rule("block", p, q, k, 100_000, seed=k)
    assert result.p_value > LEVEL


def test_the_engines_block_rule_matches_the_lab_and_follows_p():
    """core.decoding.block.verify_block, run round by round on i.i.d. positions, keeps what
    the lab's vectorised rule keeps and emits a stream that follows p (chi-square at 0.001)."""
    p = torch.tensor([0.4, 0.4, 0.2], dtype=torch.float64)
    q = torch.tensor([0.05, 0.25, 0.7], dtype=torch.float64)
    k, rounds = 3, 6000
    gen = torch.Generator().manual_seed(7)
    target, draft = p.repeat(k + 1, 1), q.repeat(k, 1)  # [K+1, V], [K, V]
    kept, stream = [], []
    for _ in range(rounds):
        drafts = torch.multinomial(q, k, replacement=True, generator=gen)
        v = verify_block(target, draft, drafts, gen)
        kept.append(v.n_accepted)
        stream += [*drafts[: v.n_accepted].tolist(), v.next_token]
    lab = run_rule("block", p.numpy(), q.numpy(), k, ROUNDS, seed=1)
    assert np.mean(kept) == pytest.approx(lab.mean_accepted, abs=0.05)
    counts = np.bincount(stream, minlength=3)
    assert chi2_pvalue(counts, p.numpy()) > LEVEL


def test_the_block_numbers_by_hand():
    """p_1 = min(1, P(X1)/Q(X1)), h_1 = Z_1 / (Z_1 + 1 - p_1), h_K = p_K: the paper's
    example with X = (A, A): p_1 = p_2 = 1/2; Z_1 = sum max(0, P/2 - Q) = 0, so h_1 = 0."""
    p = torch.tensor([PAPER_P] * 3, dtype=torch.float64)
    q = torch.tensor([PAPER_Q] * 2, dtype=torch.float64)
    weights, h = block_numbers(p, q, torch.tensor([0, 0]))
    assert weights.tolist() == pytest.approx([0.5, 0.25]) and h.tolist() == pytest.approx([0, 0.25])
    weights, h = block_numbers(p, q, torch.tensor([1, 0]))  # B then A
    assert weights.tolist() == pytest.approx([1.0, 0.5])
    assert h[0] == pytest.approx(1.0)  # Z_1 = 1/3 over 1/3 + 0


def test_greedy_block_is_the_token_wise_result():
    """One-hot p and q: the block keeps exactly the target's argmax prefix, then its token."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        k, v = int(rng.integers(1, 6)), 6
        target_ids = rng.integers(0, v, k + 1)
        drafts = np.where(rng.random(k) < 0.7, target_ids[:k], rng.integers(0, v, k))
        p = torch.zeros(k + 1, v, dtype=torch.float64)
        p[torch.arange(k + 1), torch.tensor(target_ids)] = 1.0
        q = torch.zeros(k, v, dtype=torch.float64)
        q[torch.arange(k), torch.tensor(drafts)] = 1.0
        a = verify_block(p, q, torch.tensor(drafts))
        b = verify(p, q, torch.tensor(drafts))
        assert (a.n_accepted, a.next_token, a.next_status) == (
            b.n_accepted,
            b.next_token,
            b.next_status,
        )


def test_every_rule_sees_the_same_draws():
    drafts, u, u_next = shared_draws(PAPER_Q, 2, 1000, seed=3)
    again = shared_draws(PAPER_Q, 2, 1000, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip((drafts, u, u_next), again, strict=True))


def test_lab_on_sequences_from_the_command_line(capsys):
    args = ["lab", "--p", "0.3333333,0.6666667", "--q", "0.6666667,0.3333333", "--k", "2"]
    assert main([*args, "--samples", "100000", "--rules", "token,block,typical", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rules = {r["rule"]: r for r in out["rules"]}
    assert set(rules) == {"token", "block", "typical"} and rules["typical"]["lossy"]
    assert rules["block"]["mean_accepted"] > rules["token"]["mean_accepted"]
    assert main([*args, "--rules", "oracle"]) == 2
    assert "unknown oracle" in capsys.readouterr().err


# --- block verification in the engine ------------------------------------------------------


def weak_draft(pair):
    """The pair with a confidently wrong draft: its output layer scaled up 8x, so q is far
    peakier than p and often on other tokens (a low acceptance)."""
    import copy

    draft = copy.deepcopy(pair.draft)
    with torch.no_grad():
        draft.get_output_embeddings().weight.mul_(8.0)
    return dataclasses.replace(pair, draft=draft)


BLOCK_CASES = {  # name: (K, sampling, tokens per session, weak draft)
    "K1": (1, dict(temperature=1.0), 4, False),
    "K4": (4, dict(temperature=1.0), 6, False),
    "K7-T0.7": (7, dict(temperature=0.7), 8, False),
    "top-k-top-p": (4, dict(temperature=1.0, top_k=20, top_p=0.9), 6, False),  # both warps
    "weak-draft": (4, dict(temperature=1.0), 6, True),
}


@pytest.mark.parametrize("case", list(BLOCK_CASES))
def test_block_sessions_follow_the_target(pair, case):
    """The project's end-to-end test (whole emitted sequences against a fresh target
    forward at every prefix, tests/test_drafters.py) under --verifier block: K 1, 4 and 7,
    T 1 and 0.7, top-k with top-p, and a weak draft."""
    from specviz.core.decoding.k_policy import PolicyConfig
    from specviz.core.decoding.warp import SamplingConfig
    from specviz.core.drafters.registry import DrafterConfig
    from tests.test_drafters import N_RUNS, looping_prompt, run_sequences, sequence_pvalue

    k, sampling, n_tokens, weak = BLOCK_CASES[case]
    config = SamplingConfig(**sampling)
    used = weak_draft(pair) if weak else pair
    prompt_ids = looping_prompt(pair)
    sequences, statuses = run_sequences(
        used, DrafterConfig(), PolicyConfig(), k, N_RUNS, n_tokens, prompt_ids, seed=3,
        verifier="block", sampling=config,
    )  # fmt: skip
    seen = {s for r in statuses for s in r}
    assert {"accepted", "rejected", "resampled"} <= seen
    assert sequence_pvalue(pair, prompt_ids, sequences, config) > LEVEL


@pytest.mark.parametrize("k", [1, 4, 7])
def test_greedy_block_equals_generate(pair, k):
    from specviz.core.engine.speculative import SpeculativeEngine
    from specviz.core.trace.records import Settings
    from tests.test_drafters import PROMPTS, greedy_reference

    for prompt in PROMPTS:
        settings = Settings(k=k, temperature=0, max_new_tokens=20, verifier="block")
        engine = SpeculativeEngine(pair, settings)
        header = engine.prefill(prompt, calibrate=False)
        ours = [t.id for r in engine.run() for t in r.tokens if t.emitted]
        assert ours == greedy_reference(pair.target, list(header.prompt_ids), 20, pair.eos_token_id)


def test_block_rounds_keep_the_caches_exact_and_the_trace_valid(pair, tmp_path):
    from specviz.core.engine.speculative import SpeculativeEngine
    from specviz.core.trace.check_session import check_session
    from specviz.core.trace.files import load, save
    from specviz.core.trace.records import Settings
    from specviz.core.trace.session import Session
    from tests.test_engine import assert_caches_fresh

    settings = Settings(k=4, temperature=1.0, seed=5, max_new_tokens=60, verifier="block")
    engine = SpeculativeEngine(pair, settings)
    session = Session(engine.prefill("And the earth was", calibrate=False))
    for rnd in engine.run(max_rounds=10):
        session.append(rnd)
        assert rnd.block is not None and len(rnd.block.h) == rnd.n_drafted
        assert_caches_fresh(engine, pair)
    assert check_session(session) == []
    path = tmp_path / "block.jsonl"
    save(session, path)
    back = load(path)
    assert [r.block for r in back.rounds] == [r.block for r in session.rounds]
    assert check_session(back) == []
    # A round whose kept prefix contradicts its block numbers is named.
    bad = with_extras(
        session.rounds[0],
        block={**session.rounds[0].block.to_json(), "u": [1.0] * session.rounds[0].n_drafted},
    )
    problems = check_session(Session(session.header, [bad, *session.rounds[1:]]))
    assert any(p.field == "block.u" for p in problems) or session.rounds[0].n_accepted == 0


def test_the_window_offers_block_and_explains_a_block_position(pair, qtbot):
    """The Sampling box's Verifier gives settings.verifier; the distribution panel reads a
    block round's numbers at the selected position out loud."""
    from specviz.core.engine.speculative import SpeculativeEngine
    from specviz.core.metrics.position_bars import position_bars
    from specviz.core.trace.records import Settings
    from specviz.gui.distribution.text import summary_html
    from specviz.gui.setup.controls import Controls

    controls = Controls()
    qtbot.addWidget(controls)
    controls.verifier_combo.setCurrentIndex(controls.verifier_combo.findData("block"))
    assert controls.settings().verifier == "block"
    controls.set_settings(Settings())
    assert controls.settings().verifier == "token"
    engine = SpeculativeEngine(pair, Settings(k=4, seed=2, max_new_tokens=30, verifier="block"))
    engine.prefill("And the earth was", calibrate=False)
    rnd = engine.step()
    bars = position_bars(rnd, 0)
    weight, h, u = bars.block
    assert (weight, h, u) == (rnd.block.weights[0], rnd.block.h[0], rnd.block.u[0])
    text = summary_html(bars)
    assert "judged as a block" in text and f"{rnd.n_accepted} of them" in text


def test_the_verifier_seam_names_the_rules_the_trace_knows(pair, monkeypatch):
    """The engine judges through core.decoding.verifier: each rule the trace format's
    registry names (core.trace.verifiers) is built there; a rule registered is the one the
    engine runs."""
    import dataclasses

    from specviz.core.decoding import verifier as verifier_module
    from specviz.core.engine.speculative import SpeculativeEngine
    from specviz.core.trace import verifiers
    from specviz.core.trace.records import Settings

    for name in verifiers.SPECS:
        assert verifier_module.verifier_for(name).kind == name
    calls = []

    class Counting(verifier_module.TokenVerifier):
        def verdict(self, p, q, drafts, generator, settings=None):
            calls.append(int(drafts.shape[0]))
            return super().verdict(p, q, drafts, generator, settings)

    counting = dataclasses.replace(verifiers.SPECS["token"], factory=Counting)
    monkeypatch.setitem(verifiers.SPECS, "token", counting)
    engine = SpeculativeEngine(pair, Settings(k=3, seed=1, max_new_tokens=12))
    engine.prefill("And the earth was", calibrate=False)
    rounds = list(engine.run())
    assert calls == [r.n_drafted for r in rounds]
    with pytest.raises(ValueError, match="unknown verifier"):
        verifier_module.verifier_for("nucleus")


def test_the_stream_marks_what_the_block_kept_beyond_the_token_wise_stop(pair, qtbot):
    """A block round's accepted drafts from the first u >= min(1, p/q) on (where the token
    rule with the same draws stops) are dotted in the stream and say so on hover; a token
    round has none."""
    from specviz.core.engine.speculative import SpeculativeEngine
    from specviz.core.trace.records import Settings
    from specviz.core.trace.rule_numbers import kept_beyond_token_stop
    from specviz.gui.stream.token_view import TokenView

    rounds = []
    for seed in range(8):
        settings = Settings(k=6, seed=seed, max_new_tokens=40, verifier="block")
        engine = SpeculativeEngine(pair, settings)
        engine.prefill("And the earth was", calibrate=False)
        rounds += list(engine.run())
    gained = [r for r in rounds if kept_beyond_token_stop(r)]
    assert gained, "no block round kept more than the token rule would have"
    rnd = gained[0]
    beyond = sorted(kept_beyond_token_stop(rnd))
    judged = [t for t in rnd.tokens if t.status in ("accepted", "rejected")]
    stop = next(i for i, t in enumerate(judged) if t.u >= t.accept_prob)
    assert all(rnd.tokens[j].status == "accepted" for j in beyond) and stop < rnd.n_accepted
    view = TokenView()
    qtbot.addWidget(view)
    view.clear_session(None)
    view.append_rounds([dataclasses.replace(rnd, index=0)])
    dotted = view.char_format(0, beyond[0]).underlineStyle()
    assert dotted == view.char_format(0, beyond[0]).UnderlineStyle.DotLine
    assert view.char_format(0, 0).underlineStyle() != dotted or 0 in beyond
    assert "beyond the token-wise stop" in view.tooltip_at((0, beyond[0]))
    token_round = with_extras(dataclasses.replace(rnd, settings=Settings(k=6)), block=None)
    assert kept_beyond_token_stop(token_round) == set()
