"""The losslessness lab: the seeds' arithmetic, and the single-position rule run N times.

At one position the draft proposes x ~ q, the target keeps it when u < min(1, p(x)/q(x)),
and a rejection emits one token from norm(max(0, p - q)). Run that N times and the emitted
tokens follow p: `monte_carlo` does it vectorised in torch, chunk by chunk, and measures
how far the empirical distribution is from p (total variation, Pearson chi-square). Two
WRONG rules show what breaks without each half of the construction. The accept test is
`sampling.judge`, the residual `sampling.residual_distribution` and every draw
`sampling.sample_n`: the functions the engine's `verify()` runs, so the lab shows that rule.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from specviz.core import sampling
from specviz.core.bars import REST_LABEL  # noqa: F401 (the last bar of a long distribution; re-exported)
from specviz.core.lab_rules import MAX_SAMPLES, MIN_SAMPLES, RULE_LABELS, RULES  # noqa: F401 (re-exported)
from specviz.core.sampling import SamplingConfig, acceptance_mass, residual_distribution, warp

# The seeds' worked example: four tokens, the draft q and the target p.
SEED_TOKENS = ("A", "B", "C", "D")
SEED_Q = (0.2, 0.4, 0.3, 0.1)
SEED_P = (0.5, 0.1, 0.1, 0.3)


LEVEL = 0.001  # a chi-square p-value below this says the emitted tokens do not follow p
MIN_EXPECTED = 5.0  # chi-square cells expected fewer times than this are merged into one


def normalise(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """values / sum(values) as float64; ValueError for negative, non-finite or all-zero."""
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    if arr.size == 0:
        raise ValueError("a distribution needs at least one entry")
    if not np.isfinite(arr).all():
        raise ValueError("probabilities must be finite numbers")
    if (arr < 0).any():
        bad = ", ".join(f"{v:g}" for v in arr[arr < 0][:3])
        raise ValueError(f"probabilities cannot be negative (got {bad})")
    total = arr.sum()
    if total <= 0:
        raise ValueError("a distribution needs some mass: all entries are zero")
    return arr / total


def set_entry(values: Sequence[float] | np.ndarray, index: int, value: float) -> np.ndarray:
    """A distribution with entry `index` set to `value` in [0, 1] and the others scaled to
    fill 1 - value in proportion (evenly when they are all zero): a slider editor's step."""
    arr = normalise(values)
    if not 0 <= value <= 1:
        raise ValueError(f"a probability must be between 0 and 1, got {value:g}")
    others = np.delete(arr, index)
    if others.size == 0:
        return np.ones(1)
    rest = others.sum()
    others = (
        others * ((1 - value) / rest)
        if rest > 0
        else np.full(others.size, (1 - value) / others.size)
    )
    return np.insert(others, index, value)


@dataclass(frozen=True)
class Arithmetic:
    """The seeds' step-by-step arithmetic at one position, per token. Arrays are [V]."""

    p: np.ndarray  # target
    q: np.ndarray  # draft
    overlap: np.ndarray  # min(p, q) = q * min(1, p/q): the acceptance path's mass
    excess: np.ndarray  # max(0, p - q): what the acceptance path leaves uncovered
    alpha: float  # sum min(p, q): the probability that a draft is accepted
    residual: np.ndarray  # norm(max(0, p - q)): where a rejection resamples from
    reject_path: np.ndarray  # (1 - alpha) * residual: the rejection path's mass
    total: np.ndarray  # overlap + reject_path: equal to p, token by token

    @property
    def reject(self) -> float:
        """1 - alpha: the probability of a rejection."""
        return 1.0 - self.alpha

    @property
    def matches_p(self) -> np.ndarray:
        """[V] bool: the two paths add up to p (to float precision) for each token."""
        return np.abs(self.total - self.p) <= 1e-12

    def rows(self, layout: BarLayout) -> tuple[ArithmeticRow, ...]:
        """The arithmetic table for the bars of a layout, "everything else" summed."""
        cols = [
            layout.apply(v)
            for v in (self.p, self.q, self.overlap, self.excess, self.residual, self.reject_path)
        ]
        cols.append(layout.apply(self.total))
        ok = self.matches_p
        checks = [bool(ok[i]) for i in layout.ids]
        if layout.has_rest:
            rest = np.ones(ok.size, dtype=bool)
            rest[layout.ids] = False
            checks.append(bool(ok[rest].all()))
        return tuple(
            ArithmeticRow(label, *(float(c[i]) for c in cols), checks[i])
            for i, label in enumerate(layout.labels)
        )


@dataclass(frozen=True)
class ArithmeticRow:
    """One line of the seeds' table: a token (or "everything else") and its masses."""

    label: str
    p: float
    q: float
    overlap: float  # min(p, q): acceptance path
    excess: float  # max(0, p - q)
    residual: float  # norm(max(0, p - q))
    reject_path: float  # (1 - alpha) * residual
    total: float  # overlap + reject_path
    matches_p: bool  # total == p, token by token


def arithmetic(p: Sequence[float] | np.ndarray, q: Sequence[float] | np.ndarray) -> Arithmetic:
    tp, tq = _pair(p, q)
    alpha = float(acceptance_mass(tp, tq))
    residual = residual_distribution(tp, tq)  # [V] float64
    overlap = torch.minimum(tp, tq)
    reject_path = (1 - alpha) * residual
    return Arithmetic(
        p=tp.numpy(),
        q=tq.numpy(),
        overlap=overlap.numpy(),
        excess=(tp - tq).clamp_min(0).numpy(),
        alpha=alpha,
        residual=residual.numpy(),
        reject_path=reject_path.numpy(),
        total=(overlap + reject_path).numpy(),
    )


def _pair(p, q) -> tuple[torch.Tensor, torch.Tensor]:
    """Two normalised float64 tensors [V] of the same length, or ValueError."""
    pn, qn = normalise(p), normalise(q)
    if pn.shape != qn.shape:
        raise ValueError(f"p and q must have the same length ({pn.size} vs {qn.size})")
    return torch.from_numpy(pn), torch.from_numpy(qn)


@dataclass(frozen=True)
class BarLayout:
    """Which entries of a long distribution get a bar: the top ones, then "everything else"."""

    ids: np.ndarray  # [n] vocabulary indices, largest first (all of them when V is small)
    labels: tuple[str, ...]  # one per bar, "everything else" last when has_rest
    has_rest: bool

    def apply(self, values: np.ndarray) -> np.ndarray:
        """Bar heights: values[ids], then the sum of the rest when has_rest."""
        values = np.asarray(values, dtype=np.float64)
        picked = values[self.ids]
        if not self.has_rest:
            return picked
        return np.append(picked, max(0.0, float(values.sum() - picked.sum())))


def bar_layout(
    order_by: np.ndarray, labels: Sequence[str] | Callable[[int], str], n: int = 20
) -> BarLayout:
    """All entries in order when there are at most n + 1, else the n largest of order_by
    and one bar for everything else. labels: a label per entry, or a function of the id."""
    order_by = np.asarray(order_by)
    size = order_by.size
    label = labels if callable(labels) else labels.__getitem__
    if size <= n + 1:
        ids = np.arange(size)
        return BarLayout(ids, tuple(label(int(i)) for i in ids), has_rest=False)
    ids = np.argsort(-order_by, kind="stable")[:n]
    return BarLayout(ids, (*(label(int(i)) for i in ids), REST_LABEL), has_rest=True)


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
    tp, tq = _pair(p, q)  # [V] float64
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
        drafts = sampling.sample_n(tq, m, gen)  # [m]: x ~ q (a token with q = 0 never)
        u = torch.rand(m, dtype=torch.float64, generator=gen)  # [m]
        if rule == "naive-reject":
            keep = tp[drafts] >= tq[drafts]  # [m] no randomness: the wrong part
        else:
            _, keep = sampling.judge(tp[drafts], tq[drafts], u)  # [m] the engine's test
        emitted = drafts.clone()
        n_rejected = int(m - keep.sum())
        if n_rejected:
            emitted[~keep] = sampling.sample_n(resample_from, n_rejected, gen)
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


@dataclass(frozen=True)
class PositionDistributions:
    """p and q at one position of a real pair, over the full vocabulary. Arrays are [V]."""

    context_len: int  # tokens read before the position
    settings: SamplingConfig  # how p and q were warped from the logits
    p_raw: np.ndarray  # softmax(target logits): temperature 1, no top-k / top-p
    q_raw: np.ndarray  # softmax(draft logits)
    p: np.ndarray  # warped: what the rule must use, the distribution tokens are drawn from
    q: np.ndarray
    top_n: int  # how many bars a panel shows before "everything else"
    # Tokens with a text: at least the top_n of max(p, q), of max(p_raw, q_raw) and of all
    # four, ordered by their largest probability under any of the four.
    top_ids: tuple[int, ...]
    top_text: tuple[str, ...]

    @property
    def alpha(self) -> float:
        """sum min(p, q) of the warped distributions: what the rule accepts at."""
        return float(np.minimum(self.p, self.q).sum())

    @property
    def alpha_raw(self) -> float:
        """sum min(p_raw, q_raw): for contrast only; no token is drawn from these."""
        return float(np.minimum(self.p_raw, self.q_raw).sum())

    def layout(self) -> BarLayout:
        """The warped-vs-raw bars: the top_n tokens under any of the four, then the rest."""
        n = self.top_n
        return BarLayout(np.array(self.top_ids[:n]), (*self.top_text[:n], REST_LABEL), True)

    def label(self, token_id: int) -> str:
        """The text of a token in top_ids, else its id."""
        try:
            return self.top_text[self.top_ids.index(token_id)]
        except ValueError:
            return f"#{token_id}"


def position_distributions(pair, context_ids: Sequence[int], settings, top_n: int = 20):
    """One fresh forward of the target and of the draft on context_ids; the next-token
    p and q, raw and warped with `settings` (a trace Settings or a SamplingConfig).
    Runs on the caller's thread (the main window's worker)."""
    from transformers import DynamicCache

    from specviz.core.decode import forward
    from specviz.core.engine import max_positions

    if pair.draft is None:
        raise ValueError("the lab compares a draft model's q with p: load a pair with a draft")
    ids = [int(i) for i in context_ids]
    if not ids:
        raise ValueError("the context is empty: the models need at least one token to read")
    for model in (pair.target, pair.draft):
        limit = max_positions(model)
        if limit is not None and len(ids) > limit:
            raise ValueError(f"the context is {len(ids)} tokens; these models read at most {limit}")
    config = SamplingConfig(settings.temperature, settings.top_k, settings.top_p)
    config.validate()
    with torch.inference_mode():
        logits = [
            forward(model, ids, DynamicCache(), pair.vocab_size, keep=1)[0].float()  # [V]
            for model in (pair.target, pair.draft)
        ]
        raw = [torch.softmax(row, dim=-1).double() for row in logits]  # [V] each
        warped = [warp(row, config).double() for row in logits]  # [V] each
    arrays = [t.cpu().numpy() for t in (*raw, *warped)]
    # Texts for every token a bar may show: the top-n of max(p, q) (the lab's bars), of
    # max(p_raw, q_raw), and of all four (the warped-vs-raw bars), likeliest first.
    peak = np.maximum.reduce(arrays)
    wanted = set()
    for order_by in (np.maximum(arrays[2], arrays[3]), np.maximum(arrays[0], arrays[1]), peak):
        wanted.update(int(i) for i in np.argsort(-order_by, kind="stable")[:top_n])
    top_ids = tuple(sorted(wanted, key=lambda i: (-peak[i], i)))
    return PositionDistributions(
        context_len=len(ids),
        settings=config,
        p_raw=arrays[0],
        q_raw=arrays[1],
        p=arrays[2],
        q=arrays[3],
        top_n=top_n,
        top_ids=top_ids,
        top_text=tuple(pair.token_text(i) for i in top_ids),
    )
