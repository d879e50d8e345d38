"""The window's speedup, round by round: a cost model fed one round at a time.

The figures are the same function's as every other view's (metrics.speedup through
metrics.costmodel): the running median T_t(1) of the probes' steps x the tokens emitted /
the rounds' own time, over the last WINDOW rounds, with its 95% interval, beside both
predictions. The window's status bar and plot and the CSV export read a SpeedPoint; `run`,
`inspect` and the trace summary read the same figures over the same window.
Plain Python; one owner thread (the GUI's, or the export's).
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.core.metrics.costmodel import CostModel, Figures
from specviz.core.metrics.refined_band import refined_band
from specviz.core.metrics.speedup import IMPOSSIBLE, MIN_STEPS, NOISY_STATUS, Speedup
from specviz.core.trace.records import Round, SessionHeader

WINDOW = 64  # rounds the figures come from (as the summary, `specviz tune` and the Tune panel)


@dataclass(frozen=True)
class SpeedPoint:
    """The cost model's figures after one round."""

    index: int  # the round
    k: int | None  # the K the policy chose for it
    speedup: Speedup  # measured, its interval and status
    refined: float | None  # the refined prediction (per-position acceptance, probes' costs)
    leviathan: float | None  # Leviathan et al.'s formula at the window's alpha, K and c
    figures: Figures
    refined_band: tuple[float, float] | None = None  # its 95% interval (metrics.refined_band)

    @property
    def measured(self) -> float | None:
        """The figure to plot as a measurement, its band beside it (noisy too: the band says
        how noisy); None while measuring or impossible."""
        if self.speedup.status == NOISY_STATUS:
            return self.speedup.value
        return self.speedup.shown

    @property
    def impossible(self) -> float | None:
        """A computed value above the tokens per pass (flagged, never a measurement)."""
        return self.speedup.value if self.speedup.status == IMPOSSIBLE else None

    @property
    def band(self) -> tuple[float, float] | None:
        return self.speedup.interval


class SpeedTracker:
    """Feeds each round to a CostModel and keeps the latest figures."""

    def __init__(self, header: SessionHeader | None = None):
        self.model = CostModel(window=WINDOW)
        self.latest: SpeedPoint | None = None
        # A 1.0 trace (no probes): its once-measured calibration is the baseline there is.
        self.calibration = header.baseline_ms_per_token if header is not None else None

    def add(self, rnd: Round) -> SpeedPoint:
        self.model.add(rnd)
        fig = self.model.figures(advisor=False, calibration_ms=self.calibration)
        k = rnd.k if rnd.k is not None else (rnd.settings.k if rnd.settings else fig.k)
        point = SpeedPoint(
            index=rnd.index,
            k=k,
            speedup=fig.speedup,
            refined=fig.speedup_refined,
            leviathan=fig.speedup_leviathan,
            figures=fig,
            refined_band=refined_band(self.model, fig.k) if fig.speedup_refined else None,
        )
        self.latest = point
        return point


def window_text(point: SpeedPoint | None) -> tuple[str, str]:
    """The status bar's cost-model text and its tooltip (plain text)."""
    if point is None:
        return "speedup: n/a", "No rounds yet: the cost model measures as the session runs"
    fig = point.figures
    costs = fig.costs
    sp = point.speedup

    def f(value, form):
        return "n/a" if value is None else form.format(value)

    first = fig.first_round
    window = "n/a" if first is None else f"rounds {first + 1}\u2013{first + fig.rounds}"
    ratio = fig.refined_ratio
    band = point.refined_band
    spread = "" if band is None else f" [{band[0]:.2f}\u2013{band[1]:.2f}]"
    # short enough for a 1280-pixel status bar: the basis of the figures is in the tooltip
    text = (
        f"speedup {sp.brief()} \u00b7 predicted {f(point.refined, '{:.2f}×')} refined, "
        f"{f(point.leviathan, '{:.2f}×')} Leviathan"
    )
    tip = (
        f"speedup {sp.text()}\nrefined prediction {f(point.refined, '{:.2f}×')}{spread} (95%, "
        "a bootstrap over the probes and the rounds)\n"
        f"measured/refined {f(ratio, '{:.2f}')} \u00b7 "
        f"baseline {f(sp.baseline_ms, '{:.2f}')} ms/token \u00b7 "
        f"c {f(costs.cost_ratio, '{:.2f}')} \u00b7 {window}\n"
        "Measured speedup = T_t(1) x emitted tokens / the rounds' own time, over "
        f"{window} (the last {WINDOW} at most), with its 95% interval (a bootstrap over the "
        f"probes and the rounds). T_t(1), the target's ms per token alone, is the median of "
        f"{sp.steps} decoding steps timed by {sp.probes} probe(s) between rounds (context "
        f"{f(costs.context_len, '{}')} tokens; a figure from {MIN_STEPS} steps on); "
        "c = T_d(1) / T_t(1).\n"
        "The interval's verdict: 'faster' (all of it above 1), 'slower than the target "
        "alone' (all below 1), 'too noisy to tell' (wider than 1.5x and holding 1); "
        "'impossible' above the tokens per target pass (no speedup can exceed them).\n"
        "Refined prediction: E x T_t(1) / (K x T_d(1) + T_t(K+1) + o), with E from the "
        "measured per-position acceptance and every cost (o: the rule's) from the probes, "
        "none from the rounds' times.\n"
        "Leviathan et al.'s prediction: (1 - alpha^(K+1)) / ((1 - alpha)(cK + 1)), which "
        "assumes a pass over K+1 tokens costs one step.\n"
        "Re-measure (Session menu) takes a full probe after the next round."
    )
    return text, tip
