"""The lab on sequences: K drafted positions a round, i.i.d. (every position's target is p
and its draft q), each verification rule run on the same drafts and the same uniforms.

A lossless rule emits a stream of tokens that is i.i.d. p whatever the drafts; the test is a
Pearson chi-square of non-overlapping consecutive pairs against p x p (a rule that is right
at each position but wrong between them fails it too), at the lab's level (0.001). Beside
it, the mean drafted tokens a round keeps, with its 95% interval.

Rules (vectorised in numpy over rounds; the engine's are core.decoding.verify and
core.decoding.block, which tests/test_block.py holds to these):
- token: Leviathan et al. (arXiv:2211.17192), accept x with min(1, p(x)/q(x)), at the first
  rejection draw from norm(max(0, p - q));
- block: Sun et al. (arXiv:2403.10444), Algorithm 2;
- typical (LOSSY): Medusa's typical acceptance, keep x while p(x) > min(epsilon,
  delta exp(-H(p))), then a token from p: no residual;
- WRONG block variants: the token-wise criterion with the block's residual, and the
  block's h with the token-wise residual.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from specviz.core.lab.montecarlo import LEVEL, chi_square

SEQUENCE_RULES = ("token", "block", "typical", "token-block-residual", "block-token-residual")
LOSSY = {"typical"}
WRONG = {"token-block-residual", "block-token-residual"}
SEQUENCE_LABELS = {
    "token": "token-wise (Leviathan et al., Algorithm 1)",
    "block": "block verification (Sun et al., Algorithm 2)",
    "typical": "LOSSY: Medusa's typical acceptance (no residual)",
    "token-block-residual": "WRONG: the token criterion with block's residual",
    "block-token-residual": "WRONG: block's h with the token-wise residual",
}
TYPICAL_EPSILON, TYPICAL_DELTA = 0.3, 0.09  # Medusa's defaults
# A wrong variant and the right rule it differs from in one part only (the residual)
COUNTERPART = {"token-block-residual": "token", "block-token-residual": "block"}
MAX_ROUNDS = 1_000_000
MAX_VOCAB = 64  # pairs of tokens are counted: V^2 cells


@dataclass(frozen=True)
class SequenceResult:
    """One rule over `rounds` rounds of K drafts."""

    rule: str
    k: int
    rounds: int
    mean_accepted: float  # drafted tokens kept a round
    mean_accepted_ci: tuple[float, float]  # 95%
    tokens: int  # emitted
    p_value: float  # pairs of the stream against p x p
    tv: float  # total variation of the stream's tokens from p
    lossless: bool  # p_value above LEVEL
    # A wrong rule only: its right counterpart (COUNTERPART) and in how many of the rounds
    # its emitted tokens differ from that rule's on the same draws (0: this example cannot
    # tell the two apart, whatever the rounds); None for the other rules.
    counterpart: str | None = None
    rounds_differing: int | None = None

    def to_json(self) -> dict:
        return {
            "rule": self.rule,
            "label": SEQUENCE_LABELS[self.rule],
            "lossy": self.rule in LOSSY,
            "wrong": self.rule in WRONG,
            "k": self.k,
            "rounds": self.rounds,
            "mean_accepted": self.mean_accepted,
            "mean_accepted_ci": list(self.mean_accepted_ci),
            "tokens": self.tokens,
            "p_value": self.p_value,
            "tv": self.tv,
            f"lossless_at_{LEVEL}": self.lossless,
            "counterpart": self.counterpart,
            "rounds_differing": self.rounds_differing,
        }


def _draw(probs: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse CDF draws: rows of probs [n, V] (or one row [V]) at uniforms u [n]."""
    cdf = np.cumsum(probs, axis=-1)
    if cdf.ndim == 1:
        return np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), len(cdf) - 1)
    index = (cdf < (u * cdf[:, -1])[:, None]).sum(axis=1)
    return np.minimum(index, cdf.shape[1] - 1)


def _residual(weight: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """norm(max(0, w p - q)) per round [n, V]; p where that has no mass."""
    r = np.maximum(weight[:, None] * p[None, :] - q[None, :], 0.0)
    mass = r.sum(axis=1, keepdims=True)
    return np.where(mass > 1e-12, r / np.where(mass > 0, mass, 1.0), p[None, :])


def _block(p: np.ndarray, q: np.ndarray, drafts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The block's p_i and h_i, [n, K] each."""
    n, k = drafts.shape
    ratio = np.where(q[drafts] > 0, p[drafts] / np.maximum(q[drafts], 1e-300), 2.0)
    weights = np.empty((n, k))
    running = np.ones(n)
    for i in range(k):
        running = np.minimum(1.0, running * ratio[:, i])
        weights[:, i] = running
    h = np.empty((n, k))
    for i in range(k - 1):
        z = np.maximum(weights[:, i, None] * p[None, :] - q[None, :], 0.0).sum(axis=1)
        denominator = z + 1.0 - weights[:, i]
        h[:, i] = np.where(denominator > 0, z / np.where(denominator > 0, denominator, 1.0), 1.0)
    h[:, k - 1] = weights[:, k - 1]
    return weights, h


def _token_stop(p, q, drafts, u) -> np.ndarray:
    """Drafts kept by the token-wise test: the first i with u_i >= min(1, p/q), else K."""
    accept = np.minimum(1.0, np.where(q[drafts] > 0, p[drafts] / np.maximum(q[drafts], 1e-300), 2))
    rejected = u >= accept
    return np.where(rejected.any(axis=1), rejected.argmax(axis=1), drafts.shape[1])


def _stops(rule: str, p, q, drafts, u) -> tuple[np.ndarray, np.ndarray | None]:
    """(drafts `rule` keeps in each round [n], the block's p_i [n, K] or None)."""
    k = drafts.shape[1]
    if rule == "typical":
        entropy = -float(np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)))
        cut = min(TYPICAL_EPSILON, TYPICAL_DELTA * math.exp(-entropy))
        failed = p[drafts] <= cut
        return np.where(failed.any(axis=1), failed.argmax(axis=1), k), None
    weights, h = _block(p, q, drafts)
    if rule in ("block", "block-token-residual"):
        stop = u < h
        return np.where(stop.any(axis=1), k - np.argmax(stop[:, ::-1], axis=1), 0), weights
    return _token_stop(p, q, drafts, u), weights


def emitted_stream(rule: str, p, q, draws) -> tuple[np.ndarray, np.ndarray]:
    """(the emitted tokens of every round in order, drafts kept per round [n]) of `rule` on
    the shared draws (drafts [n, K], u [n, K], u_next [n]); p and q normalised."""
    rows, tau = _round_tokens(rule, p, q, draws)
    return rows[rows >= 0], tau


def _round_tokens(rule: str, p, q, draws) -> tuple[np.ndarray, np.ndarray]:
    """(each round's emitted tokens [n, K+1], -1 past its end; drafts kept per round [n])."""
    drafts, u, u_next = draws
    n, k = drafts.shape
    tau, weights = _stops(rule, p, q, drafts, u)
    if rule == "typical":
        nxt = _draw(p, u_next)  # from p itself: no residual
    else:
        if rule in ("block", "token-block-residual"):
            w = np.where(tau > 0, weights[np.arange(n), np.maximum(tau - 1, 0)], 1.0)
        else:
            w = np.ones(n)
        residual = _residual(w, p, q)  # [n, V]
        nxt = np.where(tau < k, _draw(residual, u_next), _draw(p, u_next))
    # The stream: each round's kept drafts, then its own token.
    keep = np.arange(k + 1)[None, :] < (tau + 1)[:, None]  # [n, K+1]
    tokens = np.concatenate([drafts, np.zeros((n, 1), dtype=drafts.dtype)], axis=1)
    tokens[np.arange(n), tau] = nxt
    return np.where(keep, tokens, -1).astype(np.int32), tau  # int32: V <= MAX_VOCAB


def run_rule(
    rule: str, p, q, k: int, rounds: int, seed: int = 0, draws: tuple | None = None
) -> SequenceResult:
    """Run `rule` for `rounds` rounds of K i.i.d. drafts. draws: (drafts [n, K], u [n, K],
    u_next [n]) to share between rules (the same drafts and uniforms for each)."""
    return _run(rule, p, q, k, rounds, seed, draws)[0]


def _run(rule: str, p, q, k: int, rounds: int, seed: int, draws) -> tuple:
    """(run_rule's result, each round's emitted tokens [n, K+1])."""
    if rule not in SEQUENCE_RULES:
        raise ValueError(f"unknown rule {rule!r} (one of {', '.join(SEQUENCE_RULES)})")
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    p, q = p / p.sum(), q / q.sum()
    if not 1 <= k <= 16:
        raise ValueError(f"K must be between 1 and 16, got {k}")
    if not 100 <= rounds <= MAX_ROUNDS or len(p) > MAX_VOCAB:
        raise ValueError(f"rounds 100..{MAX_ROUNDS:,} and at most {MAX_VOCAB} tokens")
    drafts, u, u_next = draws if draws is not None else shared_draws(q, k, rounds, seed)
    n, vocab = rounds, len(p)
    rows, tau = _round_tokens(rule, p, q, (drafts, u, u_next))
    stream = rows[rows >= 0]
    pairs = stream[: len(stream) // 2 * 2].reshape(-1, 2)
    counts = np.bincount(pairs[:, 0] * vocab + pairs[:, 1], minlength=vocab * vocab)
    _, _, p_value = chi_square(counts, np.outer(p, p).ravel())
    marginal = np.bincount(stream, minlength=vocab) / len(stream)
    mean, sd = float(tau.mean()), float(tau.std())
    half = 1.96 * sd / math.sqrt(n)
    return SequenceResult(
        rule=rule,
        k=k,
        rounds=n,
        mean_accepted=mean,
        mean_accepted_ci=(mean - half, mean + half),
        tokens=int(len(stream)),
        p_value=float(p_value),
        tv=float(0.5 * np.abs(marginal - p).sum()),
        lossless=p_value > LEVEL,
    ), rows


def shared_draws(q, k: int, rounds: int, seed: int = 0):
    """The drafts from q and the uniforms every rule of one comparison uses."""
    rng = np.random.default_rng(seed)
    q = np.asarray(q, dtype=np.float64)
    q = q / q.sum()
    drafts = _draw(q, rng.random(rounds * k)).reshape(rounds, k)
    return drafts, rng.random((rounds, k)), rng.random(rounds)


def compare(p, q, k: int, rounds: int, seed: int = 0, rules=SEQUENCE_RULES) -> list:
    """Every rule on the same drafts and uniforms; a wrong rule says in how many rounds it
    emitted other tokens than its right counterpart (when that rule runs too)."""
    draws = shared_draws(q, k, rounds, seed)
    runs = {rule: _run(rule, p, q, k, rounds, seed, draws) for rule in rules}
    out = []
    for rule in rules:
        result, rows = runs[rule]
        right = COUNTERPART.get(rule)
        if right in runs:
            differing = int((rows != runs[right][1]).any(axis=1).sum())
            result = replace(result, counterpart=right, rounds_differing=differing)
        out.append(result)
    return out


@dataclass(frozen=True)
class ExampleRound:
    """One round of a comparison, position by position: what the window's lab lays out."""

    drafts: tuple[int, ...]  # X_1..X_K
    p_x: tuple[float, ...]  # P(X_i)
    q_x: tuple[float, ...]  # Q(X_i)
    weights: tuple[float, ...]  # the block's p_i
    z: tuple[float | None, ...]  # Z_i = sum_x max(0, p_i P(x) - Q(x)), i < K (None at K)
    h: tuple[float, ...]  # h_i
    u: tuple[float, ...]  # the shared uniforms
    kept: dict[str, int]  # drafts each rule kept in this round


def example_round(p, q, k: int, rounds: int, seed: int = 0, index: int = 0) -> ExampleRound:
    """Round `index` of compare(p, q, k, rounds, seed)'s shared draws, with every rule's
    stop there."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    p, q = p / p.sum(), q / q.sum()
    drafts, u, _ = shared_draws(q, k, rounds, seed)
    row, u_row = drafts[index : index + 1], u[index : index + 1]
    weights, h = _block(p, q, row)
    z = [float(np.maximum(weights[0, i] * p - q, 0.0).sum()) for i in range(k - 1)]
    kept = {rule: int(_stops(rule, p, q, row, u_row)[0][0]) for rule in SEQUENCE_RULES}
    return ExampleRound(
        drafts=tuple(int(x) for x in row[0]),
        p_x=tuple(float(p[x]) for x in row[0]),
        q_x=tuple(float(q[x]) for x in row[0]),
        weights=tuple(map(float, weights[0])),
        z=(*z, None),
        h=tuple(map(float, h[0])),
        u=tuple(map(float, u_row[0])),
        kept=kept,
    )


# An example on which every wrong rule misses p at 100,000 rounds (p-values under 1e-30):
# the block stops early where p_i < 1, so the two residuals differ (tests/test_block.py).
TELLING_P, TELLING_Q, TELLING_K = (0.4, 0.4, 0.2), (0.05, 0.25, 0.7), 2


def verdict(r: SequenceResult) -> tuple[str, str]:
    """(the words, the tone: "right", "bad" or "blind") of one rule's result. A wrong rule
    that passes is never called lossless: either the example cannot tell it from its right
    counterpart (it emitted the very same tokens), or the test missed it at this size."""
    if not r.lossless:
        kind = "lossy" if r.rule in LOSSY else "wrong" if r.rule in WRONG else "exact"
        return f"misses p ({kind})", "bad"
    if r.rule in WRONG and r.rounds_differing == 0:
        return f"not tested here: the same tokens as {r.counterpart}", "blind"
    if r.rule in WRONG:
        return "wrong, not caught at this size", "blind"
    return "lossless (follows p)", "right"


def blind_spots(results) -> list[str]:
    """Sentences for the wrong rules this comparison could not show wrong, from its counts."""
    out = []
    for r in results:
        if r.rule not in WRONG or not r.lossless:
            continue
        if r.rounds_differing == 0:
            out.append(
                f"{r.rule} emitted exactly the tokens {r.counterpart} emitted in all "
                f"{r.rounds:,} rounds: its wrong residual is never drawn from on these p, q "
                f"and K, so no number of rounds can tell the two apart here."
            )
        elif r.rounds_differing is not None:
            out.append(
                f"{r.rule} differs from {r.counterpart} in {r.rounds_differing:,} of "
                f"{r.rounds:,} rounds, too few for the test at {LEVEL}: more rounds or "
                f"another example would show it."
            )
    return out
