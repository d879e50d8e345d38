"""The measured cost model, the speedup you can trust, and the refined prediction.

Everything here is computed from round records (their times, token fates and `probes`, trace
schema 1.1), so a replayed trace gives the same figures as the live session. No torch.

- T_t(1): the median of every timed target-only decoding step of the last `probe_window`
  probes (`t1_ms`), never extrapolated; T_t(n), n > 1: one target pass over n new tokens at
  the session's context, running medians, a robust line for the n not measured often;
  T_d(1): one draft step. Medians, so that a few slow passes on a busy machine do not swing
  them.
- o: the per-round work beyond the forward passes (warping, the rule, the crop), as the
  probes time it (`rule_ms`); 0 for a trace whose probes did not (schema 1.1, 1.2).
- measured speedup (metrics.speedup, with its interval): T_t(1) x emitted tokens / the
  rounds' time, over the last `window` rounds (a round over 3x the median time of its
  n_drafted counts at that cap, as the probes' medians ignore the same bursts of other
  work on a busy machine).
- refined prediction: with per-position acceptance a_1..a_K (a_i = accepted / judged at
  drafted position i, a tree's at depth i: metrics.positions), E = 1 + sum_i prod_{j<=i} a_j
  tokens per round, and speedup = E T_t(1) / (K T_d(1) + T_t(K+1) + o): the probes' costs
  and the acceptance only, never the rounds' times, so that measured / refined is a test of
  the model.
- Leviathan et al. 2023 (arXiv:2211.17192, eq. 1; `predicted_speedup`):
  (1 - a^(K+1)) / ((1 - a)(K c + 1)), c = T_d(1) / T_t(1); it assumes T_t(K+1) = T_t(1) and
  o = 0, so it overestimates.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from specviz.core.metrics.positions import PositionCounts, judged_fates, judged_pairs
from specviz.core.metrics.speedup import MIN_PROBES, MIN_STEPS, Speedup, clean_ms, measure
from specviz.core.metrics.whatif import whatif_fates
from specviz.core.trace.extras.probes import Probes
from specviz.core.trace.records import Round

ADVISOR_KS = tuple(range(1, 17))  # the K the advisor's curve covers
SLOW = 3.0  # a round slower than SLOW x the median of its n_drafted counts as that much
STEADY = 3  # probes of one n before its own median is used rather than the fitted line


def predicted_speedup(alpha: float, k: float, c: float) -> float | None:
    """Leviathan et al.'s expected walltime improvement for acceptance alpha, K drafts, cost
    ratio c; None for figures no session has (from a trace that does not validate)."""
    if not (0 <= alpha <= 1 and 0 <= k <= 1e6 and 0 <= c < math.inf):
        return None
    if alpha >= 1.0:
        return (k + 1) / (k * c + 1)  # the limit alpha -> 1
    return (1 - alpha ** (k + 1)) / ((1 - alpha) * (k * c + 1))


def expected_tokens(accept: Sequence[float]) -> float:
    """E = 1 + sum_i prod_{j<=i} a_j: expected tokens a round of K = len(accept) emits.

    a_i is the probability that drafted position i is accepted given that all before it
    were; position i is reached (and its token emitted) with probability prod_{j<=i} a_j,
    and every round ends with one target token (resampled or bonus).
    """
    total, reach = 1.0, 1.0
    for a in accept:
        reach *= a
        total += reach
    return total


def refined_speedup(
    accept: Sequence[float], t_target_1: float, t_draft: float, t_target_k1: float, overhead: float
) -> float:
    """E T_t(1) / (K T_d(1) + T_t(K+1) + o): target-only ms per token over speculative."""
    k = len(accept)
    return expected_tokens(accept) * t_target_1 / (k * t_draft + t_target_k1 + overhead)


def acceptance_for(by_position: Sequence[float | None], k: int, fallback: float) -> list[float]:
    """a_1..a_k: the measured ones; positions never judged take the last measured value (or
    `fallback` when there is none): an extrapolation, used for the advisor's longer K."""
    out: list[float] = []
    last = fallback
    for i in range(k):
        a = by_position[i] if i < len(by_position) else None
        if a is not None:
            last = a
        out.append(last)
    return out


def theil_sen(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """(intercept, slope) of the Theil-Sen line: the median of pairwise slopes, robust to a
    few points slowed by a busy machine. None for fewer than two distinct x."""
    slopes = [
        (y2 - y1) / (x2 - x1)
        for i, (x1, y1) in enumerate(points)
        for x2, y2 in points[i + 1 :]
        if x2 != x1
    ]
    if not slopes:
        return None
    slope = statistics.median(slopes)
    return statistics.median(y - slope * x for x, y in points), slope


def capped_ms(rounds: Sequence[tuple[int, float]]) -> list[float]:
    """The rounds' times, (n_drafted, ms) each, with a round slower than SLOW times the
    median of the rounds of its n_drafted counted at that cap: on a busy machine a burst of
    other work can slow a few rounds 10-100x, and the probes' medians ignore such bursts,
    so the measured speedup must too. Rounds at the same n_drafted differ by far less."""
    by_n: dict[int, list[float]] = {}
    for n, ms in rounds:
        by_n.setdefault(n, []).append(ms)
    cap = {n: SLOW * statistics.median(v) for n, v in by_n.items()}
    return [c if (c := cap[n]) < ms else ms for n, ms in rounds]  # min(ms, cap), faster


def leviathan_curve(alpha: float | None, c: float | None) -> tuple[tuple[int, float], ...]:
    """Leviathan et al.'s prediction for K = 1..16 (for comparison beside the refined one)."""
    if alpha is None or c is None:
        return ()
    return tuple((k, predicted_speedup(alpha, k, c)) for k in ADVISOR_KS)


def _median(values: Iterable[float]) -> float | None:
    values = list(values)
    return statistics.median(values) if values else None


def tree_depth(rnd: Round) -> int:
    """A tree round's depth (its draft passes), 0 for a chain's round."""
    if rnd.tree is None:
        return 0
    return rnd.tree.nodes.depth


def round_k(rnd: Round) -> int:
    """The K a round was asked for: its policy's k, its settings' k, or what it drafted."""
    if rnd.k is not None:
        return rnd.k
    if rnd.settings is not None:
        return rnd.settings.k
    return rnd.n_drafted


class Folded(NamedTuple):
    """What the cost model keeps of a round."""

    index: int
    k: int
    n: int  # n_drafted
    emitted: int
    draft_ms: float
    verify_ms: float
    judged: tuple[tuple[int, bool], ...]  # (position, accepted?): positions.judged_pairs
    tree: int = 0  # a token tree's round: its depth (draft passes); n counts its nodes

    @property
    def ms(self) -> float:
        return self.draft_ms + self.verify_ms

    @property
    def fates(self) -> tuple[bool, ...]:
        """Accepted? of each judged draft, in order (a chain's: position 1, 2, ...)."""
        return tuple(ok for _, ok in self.judged)


@dataclass(frozen=True)
class Costs:
    """A snapshot of the measured costs, ms. Absent figures are None."""

    target: dict[int, float]  # n -> running median of T_t(n)
    counts: dict[int, int]  # n -> probes in that median
    draft: float | None  # T_d(1)
    overhead0: float | None  # o = overhead0 + overhead1 * K
    overhead1: float
    context_len: int | None  # of the latest probe
    n_probes: int  # probes folded so far
    t1_steps: tuple[tuple[float, ...], ...] = ()  # each probe's timed T_t(1) steps

    def t_target(self, n: int) -> float | None:
        """T_t(n). n = 1: the median of the probes' steps once there are enough of them
        (metrics.speedup.MIN_STEPS from MIN_PROBES probes), else None: measured, never
        extrapolated. n > 1: the running median where `STEADY` or more probes measured n,
        else the robust line through all measured n (n = K + 1 of the session's K is
        measured at every probe; the rest once at the start and then in rotation)."""
        if n == 1:
            steps = sum(len(s) for s in self.t1_steps)
            enough = steps >= MIN_STEPS and len(self.t1_steps) >= MIN_PROBES
            return self.target.get(1) if enough else None
        if self.counts.get(n, 0) >= STEADY or (n in self.target and len(self.target) == 1):
            return self.target[n]
        line = theil_sen([(m, t) for m, t in self.target.items()])
        if line is None:
            return self.target.get(n)
        return max(line[0] + line[1] * n, 0.0)

    def overhead(self, k: float) -> float:
        if self.overhead0 is None:
            return 0.0
        return max(self.overhead0 + self.overhead1 * k, 0.0)

    @property
    def cost_ratio(self) -> float | None:
        """c = T_d(1) / T_t(1), as Leviathan's formula uses it."""
        t1 = self.t_target(1)
        return self.draft / t1 if t1 and self.draft is not None else None

    def refined(self, accept: Sequence[float]) -> float | None:
        k = len(accept)
        t1, tk1 = self.t_target(1), self.t_target(k + 1)
        if t1 is None or tk1 is None or self.draft is None:
            return None
        return refined_speedup(accept, t1, self.draft, tk1, self.overhead(k))


@dataclass(frozen=True)
class Figures:
    """What the window, `specviz tune` and the advisor show, from one window of rounds."""

    rounds: int  # in the window
    first_round: int | None  # index of the window's first round
    k: int | None  # the largest K asked for in the window
    emitted: int
    ms: float  # the rounds' own time (draft + verify; probes and token records excluded),
    # slow outliers capped (capped_ms)
    costs: Costs
    acceptance_by_position: tuple[float | None, ...]
    alpha: float | None  # accepted / judged over the window
    speedup: Speedup  # measured, with its interval and status (metrics.speedup)
    speedup_refined: float | None  # at the window's K
    speedup_leviathan: float | None  # at the window's K, alpha and c
    curve: tuple[tuple[int, float], ...]  # (K, refined prediction) for ADVISOR_KS
    best_k: int | None  # argmax of the curve

    @property
    def baseline_ms_per_token(self) -> float | None:
        return self.speedup.baseline_ms

    @property
    def speedup_measured(self) -> float | None:
        """The measured speedup where it is a figure (metrics.speedup: status ok)."""
        return self.speedup.shown

    @property
    def impossible(self) -> bool:
        return self.speedup.impossible

    @property
    def refined_ratio(self) -> float | None:
        """measured / refined: how well the probes' costs and the acceptance predict."""
        return self.speedup.over(self.speedup_refined)

    @property
    def tokens_per_round(self) -> float | None:
        return self.emitted / self.rounds if self.rounds else None


class CostModel:
    """Folds round records; running medians over the last `window` rounds / `probe_window`
    probes. O(window) work per snapshot, whatever the session length. One owner thread."""

    def __init__(self, window: int | None = 64, probe_window: int | None = 16):
        """window / probe_window: rounds / probes the figures come from; None: all."""
        self.window = window
        self.probe_window = probe_window
        self.rounds: deque[Folded] = deque(maxlen=window)
        self.target: dict[int, deque[float]] = {}
        self.draft: deque[float] = deque(maxlen=probe_window)
        self.t1: deque[tuple[float, ...]] = deque(maxlen=probe_window)  # steps per probe
        self.rule: deque[float] = deque(maxlen=probe_window)
        self.context_len: int | None = None
        self.n_probes = 0

    def add(self, rnd: Round) -> None:
        judged = tuple(judged_pairs(rnd))
        n = rnd.n_drafted
        self.rounds.append(
            Folded(
                rnd.index,
                round_k(rnd),
                n,
                rnd.n_emitted,
                rnd.draft_ms,
                rnd.verify_ms,
                judged,
                tree_depth(rnd),
            )  # fmt: skip
        )
        if rnd.probes:
            self.add_probes(rnd.probes)

    def extend(self, rounds: Iterable[Round]) -> CostModel:
        for rnd in rounds:
            self.add(rnd)
        return self

    def add_probes(self, probes: Probes) -> None:
        """One probe record (core.trace.extras.probes: context_len, T_t(n) medians, T_d(1),
        every T_t(1) step, the rule's cost). A time that is not one (0, NaN) is left out."""
        pairs = probes.target_ms or ()
        for n, ms in pairs:
            for value in clean_ms([ms]):
                self.target.setdefault(int(n), deque(maxlen=self.probe_window)).append(value)
        # T_t(1)'s steps: every one a 1.3 probe timed, else the one median older ones kept
        steps = clean_ms(probes.t1_ms or [ms for n, ms in pairs if n == 1])
        if steps:
            self.t1.append(tuple(steps))
        self.draft.extend(clean_ms([probes.draft_ms]))
        self.rule.extend(clean_ms([probes.rule_ms]))
        if probes.recorded("context_len"):
            self.context_len = probes.context_len
        self.n_probes += 1

    def costs(self) -> Costs:
        target = {n: statistics.median(ms) for n, ms in sorted(self.target.items()) if ms}
        if self.t1:
            target[1] = statistics.median(v for s in self.t1 for v in s)
        counts = {n: len(ms) for n, ms in self.target.items()}
        if self.t1:
            counts[1] = sum(len(s) for s in self.t1)
        return Costs(
            target,
            counts,
            _median(self.draft),
            _median(self.rule),
            0.0,
            self.context_len,
            self.n_probes,
            tuple(self.t1),
        )

    def acceptance_by_position(self) -> list[float | None]:
        """Accepted / judged at each position (a tree's: depth) over the window's rounds."""
        counts = PositionCounts()
        for r in self.rounds:
            counts.add_pairs(r.judged)
        return counts.by_position

    def figures(self, advisor: bool = True, calibration_ms: float | None = None) -> Figures:
        """The window's figures; advisor=False leaves out the curve over ADVISOR_KS (the
        window's per-round speedup needs only the session's own K). calibration_ms: a 1.0
        trace's header baseline, the speedup's baseline only while no probe measured one."""
        costs = self.costs()
        rounds = list(self.rounds)
        emitted = sum(r.emitted for r in rounds)
        capped = capped_ms([(r.n, r.ms) for r in rounds])
        ms = sum(capped)
        k = max((r.k for r in rounds), default=None)
        judged = sum(len(r.judged) for r in rounds)
        alpha = sum(ok for r in rounds for _, ok in r.judged) / judged if judged else None
        by_pos = self.acceptance_by_position()
        speedup = measure(
            costs.t1_steps,
            [(t, r.emitted) for t, r in zip(capped, rounds, strict=True)],
            calibration_ms,
        )
        curve: list[tuple[int, float]] = []
        refined = leviathan = None
        if alpha is not None:
            for kk in ADVISOR_KS if advisor else ():
                value = costs.refined(acceptance_for(by_pos, kk, alpha))
                if value is not None:
                    curve.append((kk, value))
            if k:
                refined = costs.refined(acceptance_for(by_pos, k, alpha))
                c = costs.cost_ratio
                leviathan = predicted_speedup(alpha, k, c) if c is not None else None
        if any(r.tree for r in rounds):  # a chain's formulas do not hold: tree_refined
            refined, leviathan, curve = tree_refined(rounds, costs), None, []
        best = max(curve, key=lambda kv: kv[1])[0] if curve else None
        return Figures(
            rounds=len(rounds),
            first_round=rounds[0].index if rounds else None,
            k=k,
            emitted=emitted,
            ms=ms,
            costs=costs,
            acceptance_by_position=tuple(by_pos),
            alpha=alpha,
            speedup=speedup,
            speedup_refined=refined,
            speedup_leviathan=leviathan,
            curve=tuple(curve),
            best_k=best,
        )


def tree_refined(rounds: Sequence[Folded], costs: Costs) -> float | None:
    """A token tree's prediction: E T_t(1) / (d T_d(1) + T_t(n + 1) + o(d)), E the emitted
    tokens per round (a tree's acceptance is no product over positions), d the mean depth
    of the trees, n the mean nodes (one draft pass per level, one target pass over the tree)."""
    if not rounds:
        return None
    d = sum(r.tree for r in rounds) / len(rounds)
    n = round(sum(r.n for r in rounds) / len(rounds))
    t1, tn = costs.t_target(1), costs.t_target(n + 1)
    if t1 is None or tn is None or costs.draft is None:
        return None
    emitted = sum(r.emitted for r in rounds) / len(rounds)
    return emitted * t1 / (d * costs.draft + tn + costs.overhead(d))


def figures(
    rounds: Iterable[Round], window: int = 64, calibration_ms: float | None = None
) -> Figures:
    """The cost-model figures over the last `window` of these rounds."""
    return CostModel(window=window).extend(rounds).figures(calibration_ms=calibration_ms)


def figures_json(fig: Figures) -> dict:
    """The figures as plain JSON values (for `tune --from-trace --json`, and for `run` /
    `inspect` summaries: `"cost_model": figures_json(figures(session.rounds))`)."""
    c = fig.costs
    return {
        "rounds": fig.rounds,
        "first_round": fig.first_round,
        "k": fig.k,
        "alpha": fig.alpha,
        "tokens_per_pass": fig.tokens_per_round,
        "probes": c.n_probes,
        "t_target_ms": {str(n): ms for n, ms in c.target.items()},
        "t_draft_ms": c.draft,
        "overhead_ms": [c.overhead0, c.overhead1],
        "cost_ratio": c.cost_ratio,
        **fig.speedup.to_json(),
        "speedup_refined": fig.speedup_refined,
        "speedup_leviathan": fig.speedup_leviathan,
        "refined_ratio": fig.refined_ratio,
        "advisor": {"curve": [list(kv) for kv in fig.curve], "best_k": fig.best_k},
    }


def whatif_acceptance(rounds: Iterable[Round], k: int) -> dict:
    """metrics.whatif.whatif_fates over round records."""
    return whatif_fates((judged_fates(rnd) for rnd in rounds), k)
