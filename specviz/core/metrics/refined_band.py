"""The refined prediction's 95% interval: a bootstrap, as the measured speedup's.

The refined prediction E T_t(1) / (K T_d(1) + T_t(K+1) + o) (metrics.costmodel) is a
function of medians of a few probes and of the window's per-position acceptance; two
identical sessions on a busy machine read 0.8x and 1.8x. Its interval resamples what it is
made of: the probes' T_t(1) steps (each probe as a whole), their T_t(K+1), T_d(1) and rule
times, and the window's rounds (their fates), BOOTSTRAP times with a fixed seed, and takes
the 2.5th and 97.5th percentiles of the prediction (T_t(K+1) resampled as the prediction
takes it: its own median, or the robust line through the other n). None before MIN_PROBES
probes, or where the rounds are a tree's (tree_refined).
Plain numpy; no Qt, no torch.
"""

from __future__ import annotations

import numpy as np

from specviz.core.metrics.costmodel import STEADY, CostModel
from specviz.core.metrics.speedup import MIN_PROBES

BOOTSTRAP = 200
LEVEL = 0.95


def _medians(rng: np.random.Generator, values) -> np.ndarray:
    """Medians of BOOTSTRAP resamples of `values` [B]."""
    data = np.asarray(values, dtype=np.float64)
    return np.median(data[rng.integers(0, len(data), size=(BOOTSTRAP, len(data)))], axis=1)


def _t_target(rng: np.random.Generator, model: CostModel, n: int) -> np.ndarray | None:
    """T_t(n) of each resample [B], as Costs.t_target takes it: the median where STEADY or
    more probes measured n, else the Theil-Sen line through every measured n's median."""
    measured = {m: list(v) for m, v in model.target.items() if v}
    if len(measured.get(n, ())) >= STEADY or (n in measured and len(measured) == 1):
        return _medians(rng, measured[n])
    if len(measured) < 2:
        return None
    ns = np.array(sorted(measured), dtype=np.float64)  # [N]
    medians = np.stack([_medians(rng, measured[int(m)]) for m in ns], axis=1)  # [B, N]
    i, j = np.triu_indices(len(ns), k=1)
    slope = np.median((medians[:, j] - medians[:, i]) / (ns[j] - ns[i]), axis=1)  # [B]
    intercept = np.median(medians - slope[:, None] * ns[None, :], axis=1)  # [B]
    return np.maximum(intercept + slope * n, 0.0)


def refined_band(model: CostModel, k: int | None) -> tuple[float, float] | None:
    """The LEVEL interval of the refined prediction at K over the model's window."""
    rounds = list(model.rounds)
    t1 = [s for s in model.t1 if s]
    draft = list(model.draft)
    if not k or not rounds or any(r.tree for r in rounds) or not draft:
        return None
    if len(t1) < MIN_PROBES:
        return None
    rng = np.random.default_rng(0)
    width = max(len(s) for s in t1)
    steps = np.full((len(t1), width), np.nan)  # [P, S], NaN-padded
    for i, s in enumerate(t1):
        steps[i, : len(s)] = s
    pick = rng.integers(0, len(t1), size=(BOOTSTRAP, len(t1)))  # [B, P]
    t_1 = np.nanmedian(steps[pick].reshape(BOOTSTRAP, -1), axis=1)  # [B]
    t_k1, t_d = _t_target(rng, model, k + 1), _medians(rng, draft)  # [B]
    if t_k1 is None:
        return None
    rule = list(model.rule)
    o = _medians(rng, rule) if rule else np.zeros(BOOTSTRAP)
    # the rounds' fates: judged[r, i], accepted[r, i] for the first K positions
    judged = np.zeros((len(rounds), k))
    accepted = np.zeros((len(rounds), k))
    for r, folded in enumerate(rounds):
        fates = folded.fates[:k]
        judged[r, : len(fates)] = 1
        accepted[r, : len(fates)] = fates
    drawn = rng.integers(0, len(rounds), size=(BOOTSTRAP, len(rounds)))  # [B, R]
    n_judged, n_accepted = judged[drawn].sum(axis=1), accepted[drawn].sum(axis=1)  # [B, K]
    total_j, total_a = n_judged.sum(axis=1), n_accepted.sum(axis=1)  # [B]
    last = np.where(total_j > 0, total_a / np.maximum(total_j, 1), 0.0)  # alpha: the fallback
    expected, reach = np.ones(BOOTSTRAP), np.ones(BOOTSTRAP)
    for i in range(k):  # acceptance_for: a position never judged takes the last measured
        measured = n_judged[:, i] > 0
        last = np.where(measured, n_accepted[:, i] / np.maximum(n_judged[:, i], 1), last)
        reach = reach * last
        expected = expected + reach
    denominator = k * t_d + t_k1 + np.maximum(o, 0.0)
    values = expected * t_1 / denominator
    values = values[np.isfinite(values) & (denominator > 0)]
    if len(values) < BOOTSTRAP // 2:
        return None
    tail = 100 * (1 - LEVEL) / 2
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)
