"""The accept / reject / resample / bonus rule: exact on the seeds' example, lossless in
distribution (chi-square at a fixed level and seed), and sane at the edges."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from specviz.core.decoding.verify import acceptance_mass, residual_distribution, verify
from specviz.core.decoding.warp import SamplingConfig, warp

LEVEL = 0.001  # false-alarm rate of each chi-square test; seeds are fixed, so no flakes

SEED_Q = torch.tensor([0.2, 0.4, 0.3, 0.1], dtype=torch.float64)
SEED_P = torch.tensor([0.5, 0.1, 0.1, 0.3], dtype=torch.float64)


def test_seed_example_exact():
    """The seeds' worked example: tokens A, B, C, D."""
    assert float(acceptance_mass(SEED_P, SEED_Q)) == pytest.approx(0.5, abs=1e-15)
    residual = residual_distribution(SEED_P, SEED_Q)
    assert residual.tolist() == pytest.approx([0.6, 0.0, 0.0, 0.4], abs=1e-15)
    # acceptance path min(p, q) + rejection path (1 - alpha) * residual = p, token by token
    final = torch.minimum(SEED_P, SEED_Q) + (1 - 0.5) * residual
    assert final.tolist() == pytest.approx(SEED_P.tolist(), abs=1e-15)


def chi2_pvalue(counts: np.ndarray, probs: np.ndarray) -> float:
    """Pearson chi-square p-value; cells expected < 5 are merged into one."""
    expected = probs * counts.sum()
    big = expected >= 5
    obs = list(counts[big]) + ([counts[~big].sum()] if (~big).any() else [])
    exp = list(expected[big]) + ([expected[~big].sum()] if (~big).any() else [])
    if len(obs) < 2:
        return 1.0
    obs, exp = np.array(obs, float), np.array(exp, float)
    exp *= obs.sum() / exp.sum()
    return float(stats.chisquare(obs, exp).pvalue)


def simulate(p, q, n, seed, rule=verify):
    """Run the rule n times with drafts sampled from q; per-position emitted counts."""
    k, vocab = q.shape
    gen = torch.Generator().manual_seed(seed)
    emitted = np.zeros((k + 1, vocab), dtype=np.int64)  # token at position i, if reached
    n_acc = np.zeros(k + 1, dtype=np.int64)
    for _ in range(n):
        drafts = torch.stack([torch.multinomial(q[i], 1, generator=gen)[0] for i in range(k)])
        v = rule(p, q, drafts, gen)
        n_acc[v.n_accepted] += 1
        tokens = drafts[: v.n_accepted].tolist() + [v.next_token]
        for i, t in enumerate(tokens):
            emitted[i, t] += 1
    return emitted, n_acc


def random_pq(k, vocab, seed, concentration=1.0):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet([concentration] * vocab, size=k + 1)
    q = rng.dirichlet([concentration] * vocab, size=k)
    return torch.tensor(p), torch.tensor(q)


@pytest.mark.parametrize("k,vocab,seed", [(1, 2, 1), (3, 5, 2), (4, 12, 3), (2, 40, 4)])
def test_lossless_statistically(k, vocab, seed):
    p, q = random_pq(k, vocab, seed)
    emitted, n_acc = simulate(p, q, 12_000, seed)
    # The token at each position i follows p[i], given the round reached position i.
    for i in range(k + 1):
        assert chi2_pvalue(emitted[i], p[i].numpy()) > LEVEL, f"position {i}"
    # n_accepted = j with probability alpha_0 ... alpha_{j-1} (1 - alpha_j).
    alphas = acceptance_mass(p[:k], q).numpy()
    expected = [np.prod(alphas[:j]) * (1 - alphas[j]) for j in range(k)] + [np.prod(alphas)]
    assert chi2_pvalue(n_acc, np.array(expected)) > LEVEL


def resample_from_p(p, q, drafts, gen):
    """A wrong rule (resample from p, not the residual), to show the test has power."""
    v = verify(p, q, drafts, gen)
    if v.next_status == "resampled":
        token = int(torch.multinomial(p[v.n_accepted], 1, generator=gen))
        return type(v)(v.n_accepted, token, v.next_status, v.accept_probs, v.u, p[0])
    return v


def test_the_test_rejects_a_wrong_rule():
    p, q = random_pq(1, 5, 2)
    emitted, _ = simulate(p, q, 12_000, 2, rule=resample_from_p)
    assert chi2_pvalue(emitted[0], p[0].numpy()) < LEVEL


def test_equal_distributions_always_accept_all():
    p, _ = random_pq(3, 10, 5)
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        drafts = torch.multinomial(p[:3], 1, generator=gen)[:, 0]
        v = verify(p, p[:3].clone(), drafts, gen)
        assert v.n_accepted == 3 and v.next_status == "bonus"
        assert v.accept_probs == (1.0, 1.0, 1.0)


def test_disjoint_supports_always_reject_first():
    p = torch.tensor([[0.5, 0.5, 0, 0], [0.25] * 4], dtype=torch.float64)
    q = torch.tensor([[0, 0, 0.7, 0.3]], dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    for token in (2, 3):
        for _ in range(100):
            v = verify(p, q, torch.tensor([token]), gen)
            assert v.n_accepted == 0 and v.next_status == "resampled"
            assert v.next_token in (0, 1) and v.accept_probs == (0.0,)


def test_one_hot_distributions():
    p = torch.eye(4, dtype=torch.float64)[[2, 1, 3]]  # argmax 2, then 1, then bonus 3
    q = torch.eye(4, dtype=torch.float64)[[2, 0]]
    v = verify(p, q, torch.tensor([2, 0]))
    assert (v.n_accepted, v.next_token, v.next_status) == (1, 1, "resampled")
    q_all = torch.eye(4, dtype=torch.float64)[[2, 1]]
    v = verify(p, q_all, torch.tensor([2, 1]))
    assert (v.n_accepted, v.next_token, v.next_status) == (2, 3, "bonus")


def test_residual_underflow_falls_back_to_p():
    p = torch.tensor([0.25, 0.25, 0.5, 0.0], dtype=torch.float64)
    q = p + torch.tensor([-1e-17, 1e-17, 0, 0], dtype=torch.float64)
    r = residual_distribution(p, q)
    assert torch.isfinite(r).all() and float(r.sum()) == pytest.approx(1.0)
    assert r[3] == 0  # a token of probability 0 under p is never emitted
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        v = verify(p.repeat(2, 1), q[None], torch.tensor([1]), gen)
        assert v.next_token != 3


def test_zero_draft_probability_never_divides_by_zero():
    p = torch.tensor([[0.5, 0.5], [0.5, 0.5]], dtype=torch.float64)
    q = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    v = verify(p, q, torch.tensor([1]), torch.Generator().manual_seed(0))
    assert v.accept_probs == (1.0,)


def test_warp_greedy_is_one_hot_at_argmax():
    logits = torch.tensor([[0.1, 3.0, -1.0], [2.0, 0.0, 1.0]])
    assert warp(logits, SamplingConfig(temperature=0)).tolist() == [[0, 1, 0], [1, 0, 0]]


def test_warp_temperature_top_k_top_p():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    assert warp(logits, SamplingConfig()).tolist() == pytest.approx([0.5, 0.3, 0.15, 0.05])
    hot = warp(logits, SamplingConfig(temperature=2.0))
    assert hot.tolist() == pytest.approx(
        (
            torch.tensor([0.5, 0.3, 0.15, 0.05]) ** 0.5
            / (torch.tensor([0.5, 0.3, 0.15, 0.05]) ** 0.5).sum()
        ).tolist()
    )
    top2 = warp(logits, SamplingConfig(top_k=2))
    assert top2.tolist() == pytest.approx([0.625, 0.375, 0, 0])
    nucleus = warp(logits, SamplingConfig(top_p=0.7))  # keeps the smallest set with mass >= 0.7
    assert nucleus.tolist() == pytest.approx([0.625, 0.375, 0, 0])
    batched = warp(torch.stack([logits, logits]), SamplingConfig(top_k=2))
    assert batched.shape == (2, 4) and batched[1].tolist() == pytest.approx(top2.tolist())


def test_verify_checks_shapes():
    with pytest.raises(ValueError, match="K=2"):
        verify(torch.ones(2, 4) / 4, torch.ones(2, 4) / 4, torch.tensor([0, 1]))


def test_sample_follows_the_distribution_and_skips_zeros():
    from specviz.core.decoding.warp import sample

    p = torch.tensor([0.0, 0.1, 0.0, 0.45, 0.3, 0.15, 0.0])
    gen = torch.Generator().manual_seed(11)
    counts = np.bincount([sample(p, gen) for _ in range(20_000)], minlength=len(p))
    assert counts[[0, 2, 6]].sum() == 0
    assert chi2_pvalue(counts[p.numpy() > 0], p.numpy()[p.numpy() > 0]) > LEVEL
    unnormalised = torch.tensor([0.0, 2.0, 0.0])  # a row that does not sum to 1
    assert {sample(unnormalised, gen) for _ in range(50)} == {1}


def test_sample_n_and_judge_work_on_batches():
    from specviz.core.decoding.verify import judge
    from specviz.core.decoding.warp import sample_n

    p = torch.tensor([0.0, 0.1, 0.0, 0.45, 0.3, 0.15, 0.0])
    tokens = sample_n(p, 20_000, torch.Generator().manual_seed(12))
    assert tokens.shape == (20_000,)
    counts = np.bincount(tokens.numpy(), minlength=len(p))
    assert counts[[0, 2, 6]].sum() == 0
    assert chi2_pvalue(counts[p.numpy() > 0], p.numpy()[p.numpy() > 0]) > LEVEL
    # The accept test elementwise, on a [2, 3] batch: min(1, p/q) and u < it.
    p_x = torch.tensor([[0.2, 0.5, 0.0], [0.3, 0.1, 0.4]])
    q_x = torch.tensor([[0.4, 0.5, 0.2], [0.0, 0.2, 0.1]])
    u = torch.tensor([[0.49, 0.99, 0.0], [0.7, 0.5, 0.3]], dtype=torch.float64)
    accept, keep = judge(p_x, q_x, u)
    assert accept.flatten().tolist() == pytest.approx([0.5, 1.0, 0.0, 1.0, 0.5, 1.0])
    assert keep.tolist() == [[True, True, False], [True, False, True]]
