"""The measured speedup with its 95% interval: the one figure every view shows.

    speedup = T_t(1) / (the rounds' ms / their emitted tokens)

T_t(1) is the median of the timed target-only decoding steps the cost probes took between
rounds (core.engine.cost_probes, `t1_ms`); never a line through other n, never one burst.
The rounds' time is their own (draft + verify, probes and token records excluded), a round
slower than 3x the median of its kind counted at that cap (metrics.costmodel.capped_ms).

The interval is a bootstrap: the probes resampled as wholes (steps of one probe share its
moment on the machine), the rounds resampled apart, BOOTSTRAP times with a fixed seed, so one
trace gives one interval wherever it is read. Its 2.5th and 97.5th percentiles bound the
figure. Then, in this order:

- "measuring": fewer than MIN_STEPS steps from MIN_PROBES probes: no figure yet;
- "impossible": above the session's tokens per target pass times (1 + TOLERANCE): a round
  emits its tokens for at least one target pass over more tokens than one, so no speedup
  can exceed the tokens per pass (a bad clock or a probe that fell into a slow spell);
- "noisy": the interval holds 1 and high / low is above NOISY: too noisy to tell whether
  speculation is faster or slower than the target alone;
- "ok": the figure and its interval, which says "faster" (entirely above 1), "slower than
  the target alone" (entirely below 1) or "about as fast" (narrow around 1): verdict().

The point estimate is kept and shown with its interval under "noisy" too.

A trace of schema 1.0 has no probes: its header's session-start calibration is the
baseline ("calibration"), labelled as such, with no interval.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_STEPS = 9  # timed T_t(1) steps before the baseline is a figure
MIN_PROBES = 3  # ... from at least this many probes (moments of the session)
NOISY = 1.5  # an interval wider than this ratio says nothing
TOLERANCE = 0.15  # above tokens per pass by more than this: impossible
BOOTSTRAP = 400  # resamples of the interval
LEVEL = 0.95

OK, MEASURING, NOISY_STATUS, IMPOSSIBLE, CALIBRATION, NONE = (
    "ok",
    "measuring",
    "noisy",
    "impossible",
    "calibration",
    "none",
)


@dataclass(frozen=True)
class Speedup:
    """A window's measured speedup and what to say about it."""

    value: float | None  # the point estimate, whatever the status (None: nothing to divide)
    low: float | None  # the 95% interval (None without probes)
    high: float | None
    status: str  # ok | measuring | noisy | impossible | calibration | none
    baseline_ms: float | None  # T_t(1), the median step; None while measuring
    steps: int  # timed T_t(1) steps in the baseline
    probes: int  # probes they came from
    tokens_per_pass: float | None  # emitted tokens per round (one target pass each)

    @property
    def shown(self) -> float | None:
        """The figure a view prints as a measurement (None unless ok or calibration)."""
        return self.value if self.status in (OK, CALIBRATION) else None

    @property
    def impossible(self) -> bool:
        return self.status == IMPOSSIBLE

    def over(self, predicted: float | None) -> float | None:
        """The shown figure / a prediction (measured / refined), None where either is."""
        return self.shown / predicted if self.shown is not None and predicted else None

    @property
    def bound(self) -> float | None:
        tpp = self.tokens_per_pass
        return None if tpp is None else tpp * (1 + TOLERANCE)

    @property
    def interval(self) -> tuple[float, float] | None:
        return None if self.low is None or self.high is None else (self.low, self.high)

    def verdict(self) -> str:
        """What the interval says against the target alone: "faster", "slower than the
        target alone", "about as fast as the target alone", "too noisy to tell" (wide across
        1); "" without an interval."""
        if self.interval is None or self.status not in (OK, NOISY_STATUS):
            return ""
        if self.low > 1:
            return "faster"
        if self.high < 1:
            return "slower than the target alone"
        if self.status == NOISY_STATUS:
            return "too noisy to tell"
        return "about as fast as the target alone"

    def text(self) -> str:
        """One line for a status bar or a terminal (plain text)."""
        band = "" if self.interval is None else f" [{self.low:.2f}, {self.high:.2f}]"
        if self.status in (OK, NOISY_STATUS):
            return f"{self.value:.2f}\u00d7{band}: {self.verdict()}"
        if self.status == CALIBRATION:
            return f"{self.value:.2f}\u00d7 (session-start calibration, no interval)"
        if self.status == MEASURING:
            return f"measuring ({self.steps} of {MIN_STEPS} baseline steps)"
        if self.status == IMPOSSIBLE:
            return (
                f"impossible: {self.value:.2f}\u00d7 is above {self.tokens_per_pass:.2f} "
                "tokens per target pass (not a measurement)"
            )
        return "n/a"

    def brief(self) -> str:
        """text() for a status bar: '0.18× [0.08–0.28] slower', 'too noisy' for the rest."""
        if self.status not in (OK, NOISY_STATUS) or self.interval is None:
            return self.text()
        words = {"slower than the target alone": "slower", "too noisy to tell": "too noisy",
                 "about as fast as the target alone": "about the same"}  # fmt: skip
        verdict = self.verdict()
        return (
            f"{self.value:.2f}\u00d7 [{self.low:.2f}\u2013{self.high:.2f}] "
            f"{words.get(verdict, verdict)}"
        )

    def short(self) -> str:
        """A table cell: '1.31x [1.22-1.41]', 'measuring', 'too noisy 1.10x [0.62-1.93]',
        'impossible 5.20x'."""
        if self.status == OK:
            return f"{self.value:.2f}x [{self.low:.2f}-{self.high:.2f}]"
        if self.status == CALIBRATION:
            return f"{self.value:.2f}x (calibration)"
        if self.status == NOISY_STATUS:
            return f"too noisy {self.value:.2f}x [{self.low:.2f}-{self.high:.2f}]"
        if self.status == IMPOSSIBLE:
            return f"impossible {self.value:.2f}x"
        return self.status if self.status == MEASURING else "n/a"

    def to_json(self) -> dict:
        return {
            "speedup_measured": self.shown,
            "speedup_measured_raw": self.value,
            "speedup_ci": None if self.interval is None else [self.low, self.high],
            "speedup_status": self.status,
            "speedup_verdict": self.verdict() or None,
            "speedup_impossible": self.impossible,
            "speedup_bound": self.bound,
            "baseline_ms_per_token": self.baseline_ms,
            "baseline_steps": self.steps,
        }


def clean_ms(values) -> list[float]:
    """The times that are times: finite and above 0 (a 0 ms probe or a NaN never counts)."""
    out = []
    for v in values:
        if isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < math.inf:
            out.append(float(v))
    return out


def measure(
    steps_by_probe: Sequence[Sequence[float]],
    rounds: Sequence[tuple[float, int]],
    calibration_ms: float | None = None,
) -> Speedup:
    """The speedup of rounds ((capped ms, emitted) each) against the baseline steps
    (T_t(1) of each probe). calibration_ms: a 1.0 trace's header baseline, used only when no
    probe measured a step."""
    probes = [s for s in (tuple(clean_ms(steps)) for steps in steps_by_probe) if s]
    # A clock that went backwards or a time that is no number: that round is left out.
    rounds = [(m, e) for m, e in rounds if isinstance(m, int | float) and 0 < m < math.inf]
    n_steps = sum(len(s) for s in probes)
    ms = sum(m for m, _ in rounds)
    emitted = sum(e for _, e in rounds)
    tpp = emitted / len(rounds) if rounds else None
    if not rounds or emitted == 0 or ms <= 0:
        return Speedup(None, None, None, NONE, None, n_steps, len(probes), tpp)
    if not probes:
        if calibration_ms and 0 < calibration_ms < math.inf:
            value = calibration_ms * emitted / ms
            status = IMPOSSIBLE if value > tpp * (1 + TOLERANCE) else CALIBRATION
            return Speedup(value, None, None, status, calibration_ms, 0, 0, tpp)
        return Speedup(None, None, None, MEASURING, None, 0, 0, tpp)
    t1 = statistics.median(v for s in probes for v in s)
    value = t1 * emitted / ms
    if n_steps < MIN_STEPS or len(probes) < MIN_PROBES:
        return Speedup(value, None, None, MEASURING, None, n_steps, len(probes), tpp)
    low, high = _bootstrap(probes, rounds)
    if value > tpp * (1 + TOLERANCE):
        status = IMPOSSIBLE
    elif high / low > NOISY and low < 1 < high:  # wide, and on both sides of the target's
        status = NOISY_STATUS
    else:
        status = OK
    return Speedup(value, low, high, status, t1, n_steps, len(probes), tpp)


def _bootstrap(
    probes: Sequence[tuple[float, ...]], rounds: Sequence[tuple[float, int]]
) -> tuple[float, float]:
    """The LEVEL percentile interval of T_t(1) x emitted / ms over BOOTSTRAP resamples:
    probes drawn as wholes (with their steps), rounds drawn one by one. Fixed seed."""
    rng = np.random.default_rng(0)
    width = max(len(s) for s in probes)
    steps = np.full((len(probes), width), np.nan)  # [P, S], NaN-padded
    for i, s in enumerate(probes):
        steps[i, : len(s)] = s
    ms = np.array([m for m, _ in rounds], dtype=np.float64)  # [R]
    emitted = np.array([e for _, e in rounds], dtype=np.float64)  # [R]
    pick_p = rng.integers(0, len(probes), size=(BOOTSTRAP, len(probes)))  # [B, P]
    drawn = steps[pick_p].reshape(BOOTSTRAP, -1)  # [B, P * S]
    # nanmedian skips the padding of probes with fewer steps; without padding (every probe
    # timed as many steps, the usual case) median gives the same values at half the cost.
    padded = any(len(s) != width for s in probes)
    t1 = np.nanmedian(drawn, axis=1) if padded else np.median(drawn, axis=1)  # [B]
    pick_r = rng.integers(0, len(rounds), size=(BOOTSTRAP, len(rounds)))  # [B, R]
    total_ms, total_emitted = ms[pick_r].sum(axis=1), emitted[pick_r].sum(axis=1)  # [B]
    ok = (total_ms > 0) & (total_emitted > 0)
    ratios = t1[ok] * total_emitted[ok] / total_ms[ok]
    tail = 100 * (1 - LEVEL) / 2
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)
