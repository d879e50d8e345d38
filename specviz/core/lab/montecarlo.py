"""The losslessness lab's Monte Carlo: the single-position rule run N times.

At one position the draft proposes x ~ q, the target keeps it when u < min(1, p(x)/q(x)),
and a rejection emits one token from norm(max(0, p - q)). Run that N times and the emitted
tokens follow p: `monte_carlo` does it vectorised in torch, chunk by chunk, and measures
how far the empirical distribution is from p (total variation, Pearson chi-square). Two
WRONG rules show what breaks without each half of the construction. The accept test is
`decoding.verify.judge`, the residual `decoding.verify.residual_distribution` and every
draw `decoding.warp.sample_n`: the functions the engine's `verify()` runs, so the lab shows
that rule.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from specviz.core.decoding import verify as token_rule
from specviz.core.decoding import warp as warping
from specviz.core.decoding.verify import acceptance_mass, residual_distribution
from specviz.core.lab.distributions import tensor_pair
from specviz.core.lab.rules import MAX_SAMPLES, MIN_SAMPLES, RULES

LEVEL = 0.001  # a chi-square p-value below this says the emitted tokens do not follow p
MIN_EXPECTED = 5.0  # chi-square cells expected fewer times than this are merged into one


@dataclass(frozen=True)
class MonteCarloResult:
    """The emitted-token counts after `n` of `n_requested` runs of a rule, and their figures."""

    rule: str
    seed: int
    n: int  # samples done so far
    n_requested: int
    counts: np.ndarray  # [V] int64: how often each token was emitted
    n_accepted: int  # runs in which the draft itself was kept
    p: np.ndarray  # [V] the target distribution the rule should reproduce
    q: np.ndarray  # [V] the draft distribution the proposals came from
    alpha: float  # sum min(p, q): the expected acceptance rate of the correct rule
    tv: float  # total variation distance between the empirical distribution and p
    chi2: float  # Pearson chi-square statistic of the counts against n * p
    dof: int  # its degrees of freedom (cells after merging small ones, minus one)
    p_value: float  # probability of a chi-square this large if the tokens did follow p
    cancelled: bool = False

    @property
    def done(self) -> bool:
        return self.cancelled or self.n >= self.n_requested

    @property
    def empirical(self) -> np.ndarray:
        return self.counts / max(self.n, 1)

    @property
    def acceptance_rate(self) -> float:
        return self.n_accepted / self.n if self.n else float("nan")

    def rejects(self, level: float = LEVEL) -> bool:
        """True when the chi-square test says the emitted tokens do not follow p."""
        return self.p_value < level


def chi_square(counts: np.ndarray, probs: np.ndarray) -> tuple[float, int, float]:
    """Pearson chi-square of counts against probs: (statistic, dof, p-value). Cells expected
    fewer than 5 times are merged into one; a token seen where p is 0 gives infinity."""
    counts = np.asarray(counts, dtype=np.float64)
    expected = np.asarray(probs, dtype=np.float64) * counts.sum()
    small = expected < MIN_EXPECTED
    obs, exp = counts[~small], expected[~small]
    if small.any():
        obs, exp = np.append(obs, counts[small].sum()), np.append(exp, expected[small].sum())
    keep = (exp > 0) | (obs > 0)
    obs, exp = obs[keep], exp[keep]
    if obs.size < 2:
        return 0.0, 0, 1.0
    dof = int(obs.size - 1)
    if (exp <= 0).any():  # a token emitted that p gives no mass at all
        return math.inf, dof, 0.0
    stat = float(((obs - exp) ** 2 / exp).sum())
    return stat, dof, chi2_sf(stat, dof)


def chi2_sf(stat: float, dof: int) -> float:
    """P(X >= stat) for X ~ chi-square(dof): scipy when installed, else torch's regularised
    upper incomplete gamma Q(dof/2, stat/2) (scipy is a test dependency, not the app's)."""
    try:
        from scipy.stats import chi2
    except ImportError:
        value = torch.special.gammaincc(
            torch.tensor(dof / 2, dtype=torch.float64), torch.tensor(stat / 2, dtype=torch.float64)
        )
        return float(value)
    return float(chi2.sf(stat, dof))


def _figures(counts: np.ndarray, p: np.ndarray) -> tuple[float, float, int, float]:
    n = counts.sum()
    tv = 0.5 * float(np.abs(counts / max(n, 1) - p).sum())
    return (tv, *chi_square(counts, p))


def chunk_size(n: int) -> int:
    """About 40 progress reports a run, 1,000 to 50,000 samples each."""
    return min(50_000, max(1_000, math.ceil(n / 40)))


def monte_carlo_chunks(
    p: Sequence[float] | np.ndarray,
    q: Sequence[float] | np.ndarray,
    n: int,
    rule: str = "correct",
    seed: int = 0,
    chunk: int | None = None,
) -> Iterator[MonteCarloResult]:
    """Run the single-position rule n times, yielding the running result after each chunk.

    Each run: x ~ q, u ~ U[0, 1); "correct" keeps x when u < min(1, p(x)/q(x)) and else
    emits a draw from norm(max(0, p - q)); "naive-reject" keeps x exactly when
    p(x) >= q(x); "resample-from-p" judges like "correct" but resamples from p.
    """
    if rule not in RULES:
        raise ValueError(f"unknown rule '{rule}' (one of {', '.join(RULES)})")
    if not MIN_SAMPLES <= n <= MAX_SAMPLES:
        raise ValueError(f"samples must be between {MIN_SAMPLES:,} and {MAX_SAMPLES:,}, got {n:,}")
    tp, tq = tensor_pair(p, q)  # [V] float64
    vocab = tp.shape[0]
    alpha = float(acceptance_mass(tp, tq))
    resample_from = tp if rule == "resample-from-p" else residual_distribution(tp, tq)  # [V]
    gen = torch.Generator().manual_seed(seed)
    counts = torch.zeros(vocab, dtype=torch.int64)
    n_done = n_accepted = 0
    chunk = chunk or chunk_size(n)
    pn = tp.numpy()
    while n_done < n:
        m = min(chunk, n - n_done)
        drafts = warping.sample_n(tq, m, gen)  # [m]: x ~ q (a token with q = 0 never)
        u = torch.rand(m, dtype=torch.float64, generator=gen)  # [m]
        if rule == "naive-reject":
            keep = tp[drafts] >= tq[drafts]  # [m] no randomness: the wrong part
        else:
            _, keep = token_rule.judge(tp[drafts], tq[drafts], u)  # [m] the engine's test
        emitted = drafts.clone()
        n_rejected = int(m - keep.sum())
        if n_rejected:
            emitted[~keep] = warping.sample_n(resample_from, n_rejected, gen)
        counts += torch.bincount(emitted, minlength=vocab)
        n_done += m
        n_accepted += m - n_rejected
        c = counts.numpy().copy()
        tv, stat, dof, pv = _figures(c, pn)
        yield MonteCarloResult(
            rule, seed, n_done, n, c, n_accepted, pn, tq.numpy(), alpha, tv, stat, dof, pv
        )


def monte_carlo(
    p: Sequence[float] | np.ndarray,
    q: Sequence[float] | np.ndarray,
    n: int,
    rule: str = "correct",
    seed: int = 0,
    chunk: int | None = None,
    progress: Callable[[MonteCarloResult], bool | None] | None = None,
    cancel: threading.Event | None = None,
) -> MonteCarloResult:
    """Run `monte_carlo_chunks` to the end. After each chunk, progress(result) is called
    (on the caller's thread); it returning False, or `cancel` being set, stops the run and
    returns the partial result with cancelled=True."""
    result = None
    for result in monte_carlo_chunks(p, q, n, rule, seed, chunk):
        stop = progress is not None and progress(result) is False
        if result.n < n and (stop or (cancel is not None and cancel.is_set())):
            return replace(result, cancelled=True)
    return result
