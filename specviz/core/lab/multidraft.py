"""The multi-draft rule at one position (a token tree's node with W children), in the lab:
the target's p, W children proposed from the draft's q, and the emitted token's distribution
against p by Monte Carlo (the issue "Token trees"; the engine's tree verifier is to come).

Rules, each run on the same draws:
- sample (SpecInfer's multi-step speculative sampling, Miao et al., arXiv:2305.09781): the
  children are W i.i.d. draws from q; child i is kept with min(1, p(x_i)/q(x_i)), on a
  rejection p becomes norm(max(0, p - q)) and the next child is tried; if all fail, one token
  from the last p. Exact: each step is a rejection-sampling step with proposal q.
- topk (EAGLE / SGLang's deterministic children): the top-W tokens of q; child x is kept with
  the current p(x) (q one-hot on it), on a rejection p(x) becomes 0 and p is renormalised;
  if all fail, one token from the last p. Exact.
- WRONG no-update: every sibling judged against the first p (no residual between siblings),
  one token from norm(max(0, p - q)) if all fail;
- WRONG stale-residual: the residual taken once, from the original p and q, and never
  updated again: every later sibling is judged against it and, if all fail, the token is drawn
  from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specviz.core.lab.montecarlo import LEVEL, chi_square

MULTI_RULES = ("sample", "topk", "no-update", "stale-residual")
WRONG_MULTI = {"no-update", "stale-residual"}
MAX_WIDTH = 8
MAX_SAMPLES = 1_000_000


@dataclass(frozen=True)
class MultiDraftResult:
    rule: str
    width: int
    samples: int
    p_value: float  # the emitted tokens against p (Pearson chi-square)
    tv: float
    accepted_rate: float  # a child was kept (not the fallback draw)
    lossless: bool

    def to_json(self) -> dict:
        return {
            **vars(self),
            "wrong": self.rule in WRONG_MULTI,
            f"lossless_at_{LEVEL}": self.lossless,
        }


def _norm(rows: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    mass = rows.sum(axis=1, keepdims=True)
    return np.where(mass > 1e-12, rows / np.where(mass > 0, mass, 1.0), fallback)


def _draw(rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    cdf = np.cumsum(rows, axis=1)
    return np.minimum((cdf < (u * cdf[:, -1])[:, None]).sum(axis=1), rows.shape[1] - 1)


def run_multidraft(rule: str, p, q, width: int, samples: int, seed: int = 0) -> MultiDraftResult:
    """`samples` independent nodes of `width` children; the emitted token of each."""
    if rule not in MULTI_RULES:
        raise ValueError(f"unknown rule {rule!r} (one of {', '.join(MULTI_RULES)})")
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if p.shape != q.shape or p.ndim != 1 or (p < 0).any() or (q < 0).any():
        raise ValueError("p and q must be two non-negative vectors of one length")
    p, q = p / p.sum(), q / q.sum()
    vocab = len(p)
    if not 1 <= width <= min(MAX_WIDTH, vocab) or not 100 <= samples <= MAX_SAMPLES:
        raise ValueError(f"width 1..{min(MAX_WIDTH, vocab)}, samples 100..{MAX_SAMPLES:,}")
    rng = np.random.default_rng(seed)
    n = samples
    if rule == "topk":
        children = np.tile(np.argsort(-q, kind="stable")[:width], (n, 1))  # [n, W]
    else:
        children = _draw(np.tile(q, (n * width, 1)), rng.random(n * width)).reshape(n, width)
    u = rng.random((n, width))
    current = np.tile(p, (n, 1))  # [n, V]: each node's p, as it is updated
    first_residual = _norm(np.maximum(p - q, 0.0)[None, :].repeat(n, 0), current)
    emitted = np.full(n, -1)
    rows = np.arange(n)
    for i in range(width):
        x = children[:, i]
        open_ = emitted < 0
        if rule == "topk":
            keep = u[:, i] < current[rows, x]
        else:
            judge = np.tile(p, (n, 1)) if rule == "no-update" else current
            ratio = np.where(q[x] > 0, judge[rows, x] / np.maximum(q[x], 1e-300), 1.0)
            keep = u[:, i] < np.minimum(1.0, ratio)
        take = open_ & keep
        emitted[take] = x[take]
        rejected = open_ & ~keep
        if rule == "topk":
            zeroed = current.copy()
            zeroed[rows, x] = 0.0
            current = np.where(rejected[:, None], _norm(zeroed, current), current)
        elif rule == "sample":
            update = _norm(np.maximum(current - q[None, :], 0.0), current)
            current = np.where(rejected[:, None], update, current)
        elif rule == "stale-residual":
            current = np.where(rejected[:, None], first_residual, current)
    fallback = first_residual if rule == "no-update" else current
    left = emitted < 0
    emitted[left] = _draw(fallback[left], rng.random(int(left.sum())))
    counts = np.bincount(emitted, minlength=vocab)
    _, _, p_value = chi_square(counts, p)
    return MultiDraftResult(
        rule=rule,
        width=width,
        samples=n,
        p_value=float(p_value),
        tv=float(0.5 * np.abs(counts / n - p).sum()),
        accepted_rate=float(1.0 - left.mean()),
        lossless=p_value > LEVEL,
    )
