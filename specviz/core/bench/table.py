"""A bench's table in Spec-Bench's definitions: a row per (category, configuration), and an
"overall" row per configuration.

- #MAT (mean accepted tokens): emitted tokens / target passes (rounds), pooled over the
  questions' rounds, the bonus token counted: Spec-Bench's and vLLM's "acceptance length";
  1.0 for the target alone.
- alpha (the acceptance rate): accepted / judged drafts, pooled over the questions' rounds,
  as specviz defines it everywhere (docs/numbers.md; a tree's judged drafts are the nodes
  its rule tried, core.metrics.positions.judged_pairs).
- accepted per draft position i: rounds whose draft i was accepted / rounds that drafted a
  position i (a tree's: its accepted path reached depth i). Unconditional in vLLM's sense:
  a round that stopped earlier counts as not accepted at i.
- tokens/s: the mean over questions of a question's emitted tokens / its wall time (every
  turn, prefill included), the target alone's the same way; speedup = the configuration's
  mean tokens/s / the target alone's (Spec-Bench's speedup).
- intervals: 95% percentile bootstrap over the questions (paired: a resampled question
  brings both its runs), BOOTSTRAP resamples with a fixed seed; #MAT's and alpha's are the
  pooled ratio within each resample.
- identical (greedy only): questions whose emitted tokens equal the target alone's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specviz.core.bench.results import TARGET, BenchResult, Difference, QuestionRun
from specviz.core.bench.results import first_difference as _first_difference

BOOTSTRAP = 1000
LEVEL = 0.95
OVERALL = "overall"


@dataclass(frozen=True)
class BenchRow:
    category: str
    config: str
    questions: int
    mat: float | None
    mat_ci: tuple[float, float] | None
    accepted_by_position: tuple[float | None, ...]  # positions 1..K
    tokens_per_s: float | None
    target_tokens_per_s: float | None
    speedup: float | None
    speedup_ci: tuple[float, float] | None
    identical: int | None  # greedy: questions equal to the target alone; None when sampling
    alpha: float | None = None  # accepted / judged drafts (None: none judged, or an older file)
    alpha_ci: tuple[float, float] | None = None

    def to_json(self) -> dict:
        return {
            "category": self.category,
            "config": self.config,
            "questions": self.questions,
            "mat": self.mat,
            "mat_ci": None if self.mat_ci is None else list(self.mat_ci),
            "alpha": self.alpha,
            "alpha_ci": None if self.alpha_ci is None else list(self.alpha_ci),
            "speedup": self.speedup,
            "speedup_ci": None if self.speedup_ci is None else list(self.speedup_ci),
            "tokens_per_s": self.tokens_per_s,
            "identical": self.identical,
            "target_tokens_per_s": self.target_tokens_per_s,
            "accepted_by_position": list(self.accepted_by_position),
        }


@dataclass(frozen=True)
class QuestionLine:
    """One question under one configuration, for the per-question report."""

    question_id: str
    category: str
    config: str
    mat: float | None
    tokens_per_s: float | None
    target_tokens_per_s: float | None
    difference: Difference | None  # greedy: None = identical
    greedy: bool

    def to_json(self) -> dict:
        diff = self.difference
        return {
            "question_id": self.question_id,
            "category": self.category,
            "config": self.config,
            "mat": self.mat,
            "tokens_per_s": self.tokens_per_s,
            "target_tokens_per_s": self.target_tokens_per_s,
            "identical": (diff is None) if self.greedy else None,
            "first_difference": None if diff is None else {"turn": diff.turn + 1,
                                                           "token": diff.position},
        }  # fmt: skip


def _rate(run: QuestionRun) -> float | None:
    return run.tokens / run.seconds if run.seconds > 0 and run.tokens else None


def _mat(runs: Sequence[QuestionRun]) -> float | None:
    rounds = [r for run in runs for r in run.rounds]
    return sum(r.emitted for r in rounds) / len(rounds) if rounds else None


def _alpha(runs: Sequence[QuestionRun]) -> float | None:
    rounds = [r for run in runs for r in run.rounds]
    judged = sum(r.judged for r in rounds)
    return sum(r.accepted for r in rounds) / judged if judged else None


def _by_position(runs: Sequence[QuestionRun], k: int) -> tuple[float | None, ...]:
    rounds = [r for run in runs for r in run.rounds]
    out = []
    for i in range(1, k + 1):
        drafted = [r for r in rounds if r.drafted >= i]
        out.append(sum(r.accepted >= i for r in drafted) / len(drafted) if drafted else None)
    return tuple(out)


def _interval(values: np.ndarray) -> tuple[float, float] | None:
    values = values[np.isfinite(values)]
    if len(values) < 2:
        return None
    tail = 100 * (1 - LEVEL) / 2
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def _pairs(runs, targets) -> list[tuple[QuestionRun, QuestionRun]]:
    return [(r, targets[r.question]) for r in runs if r.question in targets]


def bench_row(
    category: str,
    label: str,
    k: int,
    runs: Sequence[QuestionRun],
    targets: dict,
    greedy: bool,
) -> BenchRow:
    """The row of one configuration's runs in one category; targets: question -> the
    target alone's run."""
    pairs = _pairs(runs, targets)
    ours = np.array([_rate(a) or np.nan for a, _ in pairs], dtype=np.float64)  # [Q]
    theirs = np.array([_rate(b) or np.nan for _, b in pairs], dtype=np.float64)  # [Q]
    emitted = np.array([sum(r.emitted for r in a.rounds) for a, _ in pairs], dtype=np.float64)
    passes = np.array([len(a.rounds) for a, _ in pairs], dtype=np.float64)
    accepted = np.array([sum(r.accepted for r in a.rounds) for a, _ in pairs], dtype=np.float64)
    judged = np.array([sum(r.judged for r in a.rounds) for a, _ in pairs], dtype=np.float64)
    speed = speed_t = speedup = speedup_ci = mat_ci = alpha_ci = None
    if pairs and np.isfinite(ours).any() and np.isfinite(theirs).any():
        speed, speed_t = float(np.nanmean(ours)), float(np.nanmean(theirs))
        speedup = speed / speed_t if speed_t > 0 else None
    if len(pairs) >= 2:
        rng = np.random.default_rng(0)
        pick = rng.integers(0, len(pairs), size=(BOOTSTRAP, len(pairs)))  # [B, Q]
        with np.errstate(invalid="ignore", divide="ignore"):
            speedup_ci = _interval(_nanmean(ours[pick]) / _nanmean(theirs[pick]))
            mat_ci = _interval(emitted[pick].sum(axis=1) / passes[pick].sum(axis=1))
            alpha_ci = _interval(accepted[pick].sum(axis=1) / judged[pick].sum(axis=1))
    identical = None
    if greedy:
        identical = sum(_first_difference(a, b) is None for a, b in pairs)
    return BenchRow(
        category, label, len(runs), _mat(runs), mat_ci, _by_position(runs, k), speed, speed_t,
        speedup, speedup_ci, identical, alpha=_alpha(runs), alpha_ci=alpha_ci,
    )  # fmt: skip


def _nanmean(a: np.ndarray) -> np.ndarray:
    """Row means ignoring NaN; NaN for an all-NaN row (no warning)."""
    finite = np.isfinite(a)
    count = finite.sum(axis=1)
    total = np.where(finite, a, 0.0).sum(axis=1)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def bench_rows(result: BenchResult) -> list[BenchRow]:
    """Every (category, configuration) row in category order, then "overall" per config."""
    greedy = result.settings.settings.temperature == 0
    targets = {r.question: r for r in result.runs if r.config == TARGET}
    cats = list(dict.fromkeys(q.category for q in result.questions))
    rows = []
    for category in [*cats, OVERALL]:
        for config in result.configs:
            runs = [
                r
                for r in result.runs
                if r.config == config.label and category in (OVERALL, r.category)
            ]
            if runs:
                rows.append(bench_row(category, config.label, config.k, runs, targets, greedy))
    return rows


def question_lines(result: BenchResult) -> list[QuestionLine]:
    """Each question under each configuration, in question order."""
    greedy = result.settings.settings.temperature == 0
    targets = {r.question: r for r in result.runs if r.config == TARGET}
    lines = []
    for run in sorted(
        (r for r in result.runs if r.config != TARGET), key=lambda r: (r.question, r.config)
    ):
        target = targets.get(run.question)
        diff = _first_difference(run, target) if greedy and target is not None else None
        lines.append(
            QuestionLine(
                result.questions[run.question].question_id, run.category, run.config,
                _mat([run]), _rate(run), None if target is None else _rate(target), diff,
                greedy and target is not None,
            )
        )  # fmt: skip
    return lines


def _ci_of(value, where: str) -> tuple[float, float] | None:
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 2 and all(_finite(v) for v in value)):
        raise ValueError(f"{where}: an interval must be [low, high] or null")
    return float(value[0]), float(value[1])


def _finite(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < 1e300


def rows_from_json(obj, limit: int = 10_000) -> list[BenchRow]:
    """The rows of `specviz bench --json`'s object; ValueError naming what is wrong. A figure
    a file lacks (alpha and its interval, before bench reported them) is None."""
    rows = obj.get("rows") if isinstance(obj, dict) else None
    if not isinstance(rows, list) or not rows:
        raise ValueError("not a `specviz bench --json` result (no rows)")
    if len(rows) > limit:
        raise ValueError(f"{len(rows)} rows, at most {limit}")
    out = []
    for i, row in enumerate(rows, 1):
        where = f"row {i}"
        if not isinstance(row, dict):
            raise ValueError(f"{where}: not an object")
        texts = [row.get("category"), row.get("config")]
        if not all(isinstance(t, str) and t for t in texts):
            raise ValueError(f"{where}: 'category' and 'config' must be strings")
        numbers = {}
        for name in ("mat", "speedup", "tokens_per_s", "target_tokens_per_s", "alpha"):
            value = row.get(name)
            if value is not None and not _finite(value):
                raise ValueError(f"{where}: '{name}' must be a number or null")
            numbers[name] = None if value is None else float(value)
        questions, identical = row.get("questions"), row.get("identical")
        if not isinstance(questions, int) or isinstance(questions, bool) or questions < 0:
            raise ValueError(f"{where}: 'questions' must be a count")
        positions = row.get("accepted_by_position") or []
        if not isinstance(positions, list) or not all(p is None or _finite(p) for p in positions):
            raise ValueError(f"{where}: 'accepted_by_position' must be a list of numbers")
        out.append(
            BenchRow(
                texts[0][:80], texts[1][:80], questions, numbers["mat"],
                _ci_of(row.get("mat_ci"), where), tuple(positions[:64]),
                numbers["tokens_per_s"], numbers["target_tokens_per_s"], numbers["speedup"],
                _ci_of(row.get("speedup_ci"), where),
                identical if isinstance(identical, int) and not isinstance(identical, bool)
                else None,
                alpha=numbers["alpha"], alpha_ci=_ci_of(row.get("alpha_ci"), where),
            )
        )  # fmt: skip
    return out
