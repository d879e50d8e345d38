"""The window's speedup, from the measured cost model (core.metrics.costmodel), round by round.

A speedup taken from one 16-step calibration at session start swings with the machine's
load (0.03x in one session, 7.92x in the next). Here it is the cost model's: the running
median T_t(1) x the tokens emitted / the rounds' own time, over the last WINDOW rounds
(probes and token records excluded), beside both predictions. A value above K + 1 cannot be
a measurement (a round emits at most K + 1 tokens): it is flagged, never plotted as fact.
Plain Python, no widgets; the GUI thread owns it.
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.core.metrics.costmodel import CostModel, Figures
from specviz.core.trace.records import Round, SessionHeader

WINDOW = 64  # rounds the figures come from (as `specviz tune` and the Tune panel)


@dataclass(frozen=True)
class SpeedPoint:
    """The cost model's figures after one round."""

    index: int  # the round
    k: int | None  # the K the policy chose for it
    measured: float | None  # None when unknown or impossible
    impossible: float | None  # a measured value above K + 1 (flagged, not a measurement)
    refined: float | None  # the refined prediction (per-position acceptance, measured costs)
    leviathan: float | None  # Leviathan et al.'s formula at the window's alpha, K and c
    figures: Figures


class SpeedTracker:
    """Feeds each round to a CostModel and keeps the latest figures."""

    def __init__(self, header: SessionHeader | None = None):
        self.model = CostModel(window=WINDOW)
        self.latest: SpeedPoint | None = None
        self.seeded = False  # the header's calibration stands in until a probe arrives
        if header is not None and header.baseline_ms_per_token:
            # A 1.0 trace (no probes): its once-measured calibration is all there is.
            probe = {"target_ms": [[1, header.baseline_ms_per_token]]}
            if header.draft_ms_per_token is not None:
                probe["draft_ms"] = header.draft_ms_per_token
            self._seed = probe
        else:
            self._seed = None

    def add(self, rnd: Round) -> SpeedPoint:
        if rnd.probes and self.seeded:  # measured figures replace the calibration
            self.model.target.clear()
            self.model.draft.clear()
            self.model.n_probes, self.seeded, self._seed = 0, False, None
        elif not rnd.probes and self._seed is not None and not self.model.n_probes:
            self.model.add_probes(self._seed)
            self.seeded = True
        self.model.add(rnd)
        fig = self.model.figures(advisor=False)  # the Tune panel draws the curve itself
        value = fig.speedup_measured
        k = rnd.k if rnd.k is not None else (rnd.settings.k if rnd.settings else fig.k)
        point = SpeedPoint(
            index=rnd.index,
            k=k,
            measured=None if fig.impossible else value,
            impossible=value if fig.impossible else None,
            refined=fig.speedup_refined,
            leviathan=fig.speedup_leviathan,
            figures=fig,
        )
        self.latest = point
        return point


def window_text(point: SpeedPoint | None) -> tuple[str, str]:
    """The status bar's cost-model text and its tooltip (plain text)."""
    if point is None:
        return "speedup: n/a", "No rounds yet: the cost model measures as the session runs"
    fig = point.figures
    costs = fig.costs

    def f(value, form):
        return "n/a" if value is None else form.format(value)

    if point.impossible is not None:
        speed = f"{point.impossible:.2f}\u00d7 (impossible: above K+1, not a measurement)"
    else:
        speed = f(point.measured, "{:.2f}\u00d7")
    first = fig.first_round
    window = "n/a" if first is None else f"rounds {first + 1}\u2013{first + fig.rounds}"
    text = (
        f"speedup {speed} \u00b7 predicted: refined {f(point.refined, '{:.2f}×')}, "
        f"Leviathan {f(point.leviathan, '{:.2f}×')} \u00b7 "
        f"baseline {f(fig.baseline_ms_per_token, '{:.2f}')} ms/token \u00b7 "
        f"c {f(costs.cost_ratio, '{:.2f}')} \u00b7 {window}"
    )
    tip = (
        "Measured speedup = T_t(1) x emitted tokens / the rounds' own time, over "
        f"{window} (the last {WINDOW} at most): T_t(1), the target's ms per token alone, "
        f"is the running median of {costs.n_probes} probe(s) taken between rounds "
        f"(context {f(costs.context_len, '{}')} tokens); c = T_d(1) / T_t(1).\n"
        "Refined prediction: E x T_t(1) / (K x T_d(1) + T_t(K+1) + o), with E from the "
        "measured per-position acceptance and o the measured per-round overhead.\n"
        "Leviathan et al.'s prediction: (1 - alpha^(K+1)) / ((1 - alpha)(cK + 1)), which "
        "assumes a pass over K+1 tokens costs one step.\n"
        "Re-measure (Session menu) takes a full probe after the next round."
    )
    return text, tip
