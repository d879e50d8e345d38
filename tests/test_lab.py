"""The losslessness lab's core: the seeds' arithmetic exactly, the Monte Carlo runner in
distribution (chi-square at fixed seeds), its cancellation, and p and q at a real position."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
import torch
from scipy import stats

from specviz.core.decoding.warp import SamplingConfig, warp
from specviz.core.lab import montecarlo as lab
from specviz.core.lab.arithmetic import arithmetic
from specviz.core.lab.distributions import (
    SEED_P,
    SEED_Q,
    SEED_TOKENS,
    bar_layout,
    normalise,
    set_entry,
)
from specviz.core.lab.position import position_distributions
from specviz.core.lab.rules import RULES
from specviz.core.metrics.position_bars import REST_LABEL

N = 200_000


def test_seed_example_exact():
    a = arithmetic(SEED_P, SEED_Q)
    assert SEED_TOKENS == ("A", "B", "C", "D")
    assert a.alpha == pytest.approx(0.5, abs=1e-15)
    assert a.reject == pytest.approx(0.5, abs=1e-15)
    assert a.overlap.tolist() == pytest.approx([0.2, 0.1, 0.1, 0.1], abs=1e-15)
    assert a.excess.tolist() == pytest.approx([0.3, 0.0, 0.0, 0.2], abs=1e-15)
    assert a.residual.tolist() == pytest.approx([0.6, 0.0, 0.0, 0.4], abs=1e-15)
    assert a.reject_path.tolist() == pytest.approx([0.3, 0.0, 0.0, 0.2], abs=1e-15)
    assert a.total.tolist() == pytest.approx(list(SEED_P), abs=1e-15)
    assert a.matches_p.all()


def test_arithmetic_rows_sum_the_rest():
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet([0.3] * 200), rng.dirichlet([0.3] * 200)
    a = arithmetic(p, q)
    layout = bar_layout(np.maximum(a.p, a.q), lambda i: f"t{i}")
    rows = a.rows(layout)
    assert len(rows) == 21 and rows[-1].label == REST_LABEL
    assert sum(r.p for r in rows) == pytest.approx(1.0)
    assert sum(r.overlap for r in rows) == pytest.approx(a.alpha)
    assert sum(r.reject_path for r in rows) == pytest.approx(1 - a.alpha)
    assert all(r.matches_p and r.total == pytest.approx(r.p, abs=1e-12) for r in rows)


def test_normalise_and_refusals():
    assert normalise([1, 1, 2]).tolist() == [0.25, 0.25, 0.5]
    with pytest.raises(ValueError, match="negative"):
        normalise([0.5, -0.1, 0.6])
    with pytest.raises(ValueError, match="all entries are zero"):
        normalise([0, 0, 0])
    with pytest.raises(ValueError, match="finite"):
        normalise([0.5, float("nan")])
    with pytest.raises(ValueError, match="at least one"):
        normalise([])


def test_set_entry_keeps_a_distribution():
    q = set_entry(SEED_Q, 0, 0.5)  # drag q(A) from 0.2 to 0.5
    assert q.sum() == pytest.approx(1.0)
    assert q[0] == 0.5
    assert q[1:].tolist() == pytest.approx([0.5 * 0.4 / 0.8, 0.5 * 0.3 / 0.8, 0.5 * 0.1 / 0.8])
    assert set_entry([1, 0, 0], 0, 0.4).tolist() == pytest.approx([0.4, 0.3, 0.3])
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError):
            set_entry(SEED_Q, 1, bad)


@pytest.mark.parametrize("rule", RULES)
def test_chi_square_at_200k_seeds_example(rule):
    """The correct rule passes the chi-square test at the 0.001 level; each wrong rule fails."""
    result = lab.monte_carlo(SEED_P, SEED_Q, N, rule, seed=0)
    assert result.n == N and result.counts.sum() == N and result.done
    if rule == "correct":
        assert result.p_value > lab.LEVEL and not result.rejects()
        assert result.tv < 0.01
    else:
        assert result.p_value < lab.LEVEL and result.rejects()
        assert result.tv > 0.05


@pytest.mark.parametrize("rule", RULES)
def test_chi_square_at_200k_random_vocabulary(rule):
    rng = np.random.default_rng(7)
    p, q = rng.dirichlet([0.5] * 30), rng.dirichlet([0.5] * 30)
    result = lab.monte_carlo(p, q, N, rule, seed=1)
    assert result.rejects() == (rule != "correct"), result.p_value


def test_each_rule_reaches_its_own_distribution():
    """What each rule really emits: p, or the seeds' arithmetic done wrong."""
    a = arithmetic(SEED_P, SEED_Q)
    expected = {
        "correct": a.p,
        # accept iff p >= q (A, D): q(x) for them, then the residual after a rejection
        "naive-reject": np.array([0.2 + 0.7 * 0.6, 0.0, 0.0, 0.1 + 0.7 * 0.4]),
        # min(p, q) + (1 - alpha) * p
        "resample-from-p": a.overlap + 0.5 * a.p,
    }
    rates = {"correct": 0.5, "naive-reject": 0.3, "resample-from-p": 0.5}
    for rule, dist in expected.items():
        result = lab.monte_carlo(SEED_P, SEED_Q, N, rule, seed=3)
        assert result.empirical == pytest.approx(dist, abs=0.005), rule
        assert result.acceptance_rate == pytest.approx(rates[rule], abs=0.005), rule
        assert result.alpha == pytest.approx(0.5)


def test_chi_square_matches_scipy_and_merges_small_cells():
    probs = np.array([0.5, 0.3, 0.196, 0.003, 0.001])
    counts = np.array([520, 290, 180, 6, 4])
    stat, dof, pv = lab.chi_square(counts, probs)
    expected = probs * counts.sum()  # the last two cells (3, 1 expected) merge: 4 cells
    obs = [520, 290, 180, 10]
    exp = [*expected[:3], expected[3:].sum()]
    ref = stats.chisquare(obs, exp)
    assert dof == 3
    assert stat == pytest.approx(ref.statistic) and pv == pytest.approx(ref.pvalue)
    # A token that p gives no mass at all, emitted: infinitely far from p.
    stat, dof, pv = lab.chi_square(np.array([90, 10]), np.array([1.0, 0.0]))
    assert stat == float("inf") and pv == 0.0


def test_chi2_pvalue_without_scipy(monkeypatch):
    cases = [(0.5, 1), (3.0, 3), (12.0, 3), (2400.0, 2421), (2600.0, 2421)]
    with_scipy = [lab.chi2_sf(s, d) for s, d in cases]
    monkeypatch.setitem(sys.modules, "scipy.stats", None)  # import fails: torch's gamma
    without = [lab.chi2_sf(s, d) for s, d in cases]
    assert without == pytest.approx(with_scipy, rel=1e-8, abs=1e-12)


def test_chunks_report_progress_in_order():
    seen = []
    result = lab.monte_carlo(SEED_P, SEED_Q, 10_000, seed=0, chunk=1_000, progress=seen.append)
    assert [r.n for r in seen] == list(range(1_000, 10_001, 1_000))
    assert seen[-1] is result and not result.cancelled
    assert all(r.counts.sum() == r.n for r in seen)


def test_cancel_by_callback_stops_at_once():
    calls = []

    def progress(result):
        calls.append(result.n)
        return False

    result = lab.monte_carlo(SEED_P, SEED_Q, 1_000_000, progress=progress)
    assert result.cancelled and result.n < 1_000_000
    assert calls == [result.n] and result.n == lab.chunk_size(1_000_000)


def test_cancel_by_event_from_another_thread_is_honoured_at_the_next_chunk():
    cancel = threading.Event()
    at_third = threading.Event()
    go_on = threading.Event()
    out = {}

    def progress(result):
        if result.n == 3_000:  # hold the run here while the other thread cancels it
            at_third.set()
            go_on.wait()

    def work():
        out["result"] = lab.monte_carlo(
            SEED_P, SEED_Q, 1_000_000, chunk=1_000, progress=progress, cancel=cancel
        )

    thread = threading.Thread(target=work)
    thread.start()
    at_third.wait()
    cancel.set()
    go_on.set()
    thread.join()
    # Cancelled after the chunk it was set during: no further chunk was drawn.
    assert out["result"].cancelled and out["result"].n == 3_000


def test_a_million_samples_in_chunks_follow_p():
    result = lab.monte_carlo(SEED_P, SEED_Q, 1_000_000, seed=2)
    assert result.n == 1_000_000 and result.counts.sum() == 1_000_000
    assert not result.rejects() and result.tv < 0.005


def test_the_lab_runs_the_engines_accept_test(monkeypatch):
    """The Monte Carlo calls sampling.judge, the test verify() is built on: break that
    one function and both the engine's verify() and the lab's correct rule go wrong."""
    from specviz.core.decoding import verify as sampling

    def keep_everything(p_x, q_x, u):
        accept = torch.ones_like(p_x.double())
        return accept, u < accept

    assert not lab.monte_carlo(SEED_P, SEED_Q, 20_000, seed=5).rejects()
    monkeypatch.setattr(sampling, "judge", keep_everything)
    broken = lab.monte_carlo(SEED_P, SEED_Q, 20_000, seed=5)
    assert broken.rejects() and broken.acceptance_rate == 1.0  # it emits q, not p
    p = torch.tensor([SEED_ROW_P, SEED_ROW_P], dtype=torch.float64)
    v = sampling.verify(p, torch.tensor([SEED_Q]), torch.tensor([1]))  # p(B) < q(B)
    assert v.n_accepted == 1  # verify() went through the same broken function


SEED_ROW_P = list(SEED_P)


def test_bad_requests():
    with pytest.raises(ValueError, match="unknown rule"):
        lab.monte_carlo(SEED_P, SEED_Q, 1000, rule="nope")
    for n in (99, 1_000_001):
        with pytest.raises(ValueError, match="samples"):
            lab.monte_carlo(SEED_P, SEED_Q, n)
    with pytest.raises(ValueError, match="same length"):
        lab.monte_carlo([0.5, 0.5], SEED_Q, 1000)
    with pytest.raises(ValueError, match="negative"):
        lab.monte_carlo([0.5, -0.5, 1.0, 0.0], SEED_Q, 1000)


def test_bar_layout_small_and_large():
    small = bar_layout(np.array([0.1, 0.5, 0.4]), ["x", "y", "z"])
    assert small.labels == ("x", "y", "z") and not small.has_rest
    assert small.apply(np.array([0.1, 0.5, 0.4])).tolist() == [0.1, 0.5, 0.4]
    values = np.arange(100, dtype=float)
    values /= values.sum()
    large = bar_layout(values, lambda i: f"#{i}")
    assert large.has_rest and len(large.labels) == 21 and large.labels[0] == "#99"
    bars = large.apply(values)
    assert bars.sum() == pytest.approx(1.0) and bars[-1] == pytest.approx(values[:80].sum())


def test_position_distributions_on_the_pair(pair):
    from transformers import DynamicCache

    from specviz.core.decoding.forward import forward
    from specviz.core.trace.records import Settings

    ids = pair.tokenizer("In the beginning God created")["input_ids"]
    settings = Settings(temperature=0.7, top_k=20, top_p=0.9)
    pos = position_distributions(pair, ids, settings)
    v = pair.vocab_size
    for name in ("p_raw", "q_raw", "p", "q"):
        arr = getattr(pos, name)
        assert arr.shape == (v,) and arr.sum() == pytest.approx(1.0, abs=1e-6), name
        assert (arr >= 0).all()
    config = SamplingConfig(0.7, 20, 0.9)
    with torch.inference_mode():
        for model, raw, warped in ((pair.target, pos.p_raw, pos.p), (pair.draft, pos.q_raw, pos.q)):
            logits = forward(model, ids, DynamicCache(), v, keep=1)[0]
            assert warped == pytest.approx(warp(logits, config).double().numpy(), abs=1e-6)
            assert raw == pytest.approx(torch.softmax(logits.double(), -1).numpy(), abs=1e-6)
    assert (pos.p > 0).sum() <= 20 and (pos.p_raw > 0).sum() > 20  # the cut is in p only
    assert pos.context_len == len(ids) and 20 <= len(pos.top_ids) <= 60
    assert pos.top_text[0] == pair.token_text(pos.top_ids[0])
    layout = bar_layout(np.maximum(pos.p, pos.q), pos.label)  # the lab's bars have texts
    labels = layout.labels[: len(layout.ids)]  # the last label is "everything else"
    assert all(
        label == pair.token_text(int(i)) for i, label in zip(layout.ids, labels, strict=True)
    )
    assert pos.layout().labels[:-1] == pos.top_text[:20]
    assert 0 <= pos.alpha <= 1 and 0 <= pos.alpha_raw <= 1
    result = lab.monte_carlo(pos.p, pos.q, 50_000, seed=4)  # on the full vocabulary
    assert result.counts.shape == (v,) and not result.rejects()
    with pytest.raises(ValueError, match="empty"):
        position_distributions(pair, [], settings)
    with pytest.raises(ValueError, match="at most"):
        position_distributions(pair, [ids[0]] * 300, settings)


def test_core_lab_and_command_import_without_qt():
    import subprocess

    script = (
        "import sys\n"
        "sys.modules['PySide6'] = None  # any Qt import now fails\n"
        "sys.modules['pyqtgraph'] = None\n"
        "import specviz.core.lab.montecarlo, specviz.cli.lab\n"
        "from specviz.cli.main import main\n"
        "sys.exit(main(['lab', '--samples', '1000', '--json']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
