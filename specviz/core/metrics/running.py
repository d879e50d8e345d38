"""The numbers specviz shows, computed from round records only.

- acceptance rate: accepted / judged drafted tokens (discarded ones were never judged);
  it estimates alpha = E[sum_x min(p(x), q(x))], which is averaged over judged positions.
  By position (a tree's: by depth) from metrics.positions, the one place judged drafts are
  placed.
- draft efficiency: accepted / all drafted tokens (vLLM's "draft acceptance rate").
- measured speedup: target-only ms per token / speculative ms per emitted token, with its
  95% interval, from metrics.speedup through the cost model over the last WINDOW rounds,
  as every view shows it; the header's session-start calibration is its baseline only for
  a trace without probes (schema 1.0), labelled so.
- predicted speedup, Leviathan et al. 2023 (arXiv:2211.17192) eq. 1:
  (1 - a^(K+1)) / ((1 - a)(K c + 1)); `summary` adds the cost model's refined prediction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specviz.core.metrics.costmodel import CostModel, figures_json, predicted_speedup
from specviz.core.metrics.positions import PositionCounts
from specviz.core.metrics.refined_band import refined_band
from specviz.core.metrics.registry import MetricFolds
from specviz.core.metrics.speed_tracker import WINDOW
from specviz.core.trace.records import DRAFTED, JUDGED, Round, SessionHeader, cost_ratio
from specviz.core.trace.session import Session

BASIS_PROBES = "probes"  # the cost model's running medians (schema 1.1)
BASIS_HEADER = "header"  # the header's baseline, measured once at session start (schema 1.0)


@dataclass(frozen=True)
class RoundStats:
    """The figures after one round: that round's own and the running ones."""

    index: int
    # this round
    n_drafted: int
    n_accepted: int
    n_emitted: int
    acceptance: float | None  # accepted / judged in this round
    alpha: float | None  # mean sum min(p, q) over this round's judged positions
    # running, over the session so far
    acceptance_running: float | None
    alpha_running: float | None
    draft_efficiency: float | None
    tokens_per_forward: float
    tokens_per_s: float | None


@dataclass
class RunningStats:
    """Folds rounds one at a time; O(1) work per round, whatever the session length."""

    baseline_ms_per_token: float | None
    draft_ms_per_token: float | None
    rounds: int = 0
    drafted: int = 0
    emitted: int = 0
    ms: float = 0.0
    alpha_sum: float = 0.0
    alpha_n: int = 0
    k_sum: int = 0
    # judged and accepted drafts by position (a tree's: by depth)
    positions: PositionCounts = field(default_factory=PositionCounts)
    # every metric of core.metrics.registry.SPECS, folded over the same rounds
    metrics: MetricFolds = field(default_factory=MetricFolds)
    # How many rounds that drafted something kept 0, 1, 2, ... drafts
    accepted_lengths: list[int] = field(default_factory=list)
    undrafted: int = 0  # rounds that drafted nothing (a lookup without a match, a limit)

    @classmethod
    def for_header(cls, header: SessionHeader) -> RunningStats:
        return cls(header.baseline_ms_per_token, header.draft_ms_per_token)

    @property
    def cost_ratio(self) -> float | None:
        return cost_ratio(self.baseline_ms_per_token, self.draft_ms_per_token)

    def add(self, rnd: Round) -> RoundStats:
        """Fold one round in. Counts come from its tokens, so that the work and the memory
        stay bounded by the record whatever its n_drafted / n_accepted say."""
        alphas = [t.alpha for t in rnd.tokens if t.status in JUDGED and t.alpha is not None]
        tried = self.positions.add(rnd)  # (position, accepted?) of each judged draft
        self.metrics.add(rnd)
        n_acc = sum(ok for _, ok in tried)
        n_drafted = (
            len(rnd.tree.parent) if rnd.tree is not None
            else sum(1 for t in rnd.tokens if t.status in DRAFTED)
        )  # fmt: skip
        self.rounds += 1
        self.drafted += n_drafted
        self.emitted += rnd.n_emitted
        self.ms += rnd.ms
        self.alpha_sum += sum(alphas)
        self.alpha_n += len(alphas)
        self.k_sum += n_drafted
        if n_drafted:
            while len(self.accepted_lengths) <= n_acc:
                self.accepted_lengths.append(0)
            self.accepted_lengths[n_acc] += 1
        else:
            self.undrafted += 1
        return RoundStats(
            index=rnd.index,
            n_drafted=rnd.n_drafted,
            n_accepted=rnd.n_accepted,
            n_emitted=rnd.n_emitted,
            acceptance=n_acc / len(tried) if tried else None,
            alpha=sum(alphas) / len(alphas) if alphas else None,
            acceptance_running=self.acceptance,
            alpha_running=self.alpha,
            draft_efficiency=self.draft_efficiency,
            tokens_per_forward=self.emitted / self.rounds,
            tokens_per_s=1000 * self.emitted / self.ms if self.ms > 0 else None,
        )

    @property
    def judged(self) -> int:
        return self.positions.total_judged

    @property
    def accepted(self) -> int:
        return self.positions.total_accepted

    @property
    def acceptance(self) -> float | None:
        return self.positions.acceptance

    @property
    def alpha(self) -> float | None:
        return self.alpha_sum / self.alpha_n if self.alpha_n else None

    @property
    def draft_efficiency(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    @property
    def speedup_predicted(self) -> float | None:
        """Leviathan's formula with the header's c (a 1.0 trace's only prediction)."""
        c, alpha = self.cost_ratio, self.alpha
        if c is None or alpha is None or not self.rounds:
            return None
        return predicted_speedup(alpha, self.k_sum / self.rounds, c)

    @property
    def acceptance_by_position(self) -> list[float | None]:
        return self.positions.by_position

    @property
    def by_position_judged(self) -> list[int]:
        return self.positions.judged

    @property
    def by_position_accepted(self) -> list[int]:
        return self.positions.accepted


def fold(session: Session) -> RunningStats:
    stats = RunningStats.for_header(session.header)
    for rnd in session.rounds:
        stats.add(rnd)
    return stats


def summary(session: Session, window: int = WINDOW) -> dict:
    """The summary line of a trace and of `specviz run` / `specviz inspect`: counts over the
    whole session, speedups over its last `window` rounds (_speedup_keys)."""
    return SummaryFold(session.header, window).extend(session.rounds).summary()


class SummaryFold:
    """summary() a round at a time: what a reader that does not keep the rounds (`inspect`
    of a huge trace) folds them into. Its memory is the cost model's window, whatever the
    session's length."""

    def __init__(self, header: SessionHeader, window: int = WINDOW):
        self.stats = RunningStats.for_header(header)
        self.model = CostModel(window=window)
        self.probed = False  # any round with cost-model probes (schema 1.1)

    def add(self, rnd: Round) -> None:
        self.stats.add(rnd)
        self.model.add(rnd)
        self.probed = self.probed or bool(rnd.probes)

    def extend(self, rounds) -> SummaryFold:
        for rnd in rounds:
            self.add(rnd)
        return self

    def summary(self) -> dict:
        s = self.stats
        return {
            "rounds": s.rounds,
            "tokens": s.emitted,
            "drafted": s.drafted,
            "judged": s.judged,
            "accepted": s.accepted,
            "acceptance_rate": s.acceptance,
            "draft_efficiency": s.draft_efficiency,
            "alpha": s.alpha,
            "acceptance_by_position": s.acceptance_by_position,
            "mean_accepted": s.accepted / s.rounds if s.rounds else None,
            "tokens_per_forward": s.emitted / s.rounds if s.rounds else None,
            "tokens_per_pass": s.emitted / s.rounds if s.rounds else None,  # the same figure
            "ms_per_token": s.ms / s.emitted if s.emitted else None,
            **_speedup_keys(self.model, self.probed, s),
        }


def _speedup_keys(model: CostModel, probed: bool, s: RunningStats) -> dict[str, Any]:
    """The summary's speedup keys, from the one speedup path (metrics.speedup through the
    cost model over its window of rounds): speedup_measured (None unless it is a figure: see
    speedup_status), speedup_ci, the bound, both predictions and their ratio. A trace
    without probes (schema 1.0) takes the header's calibration as its baseline."""
    fig = model.figures(calibration_ms=None if probed else s.baseline_ms_per_token)
    costs, first, sp = fig.costs, fig.first_round, fig.speedup
    if probed:
        basis, c, leviathan = BASIS_PROBES, costs.cost_ratio, fig.speedup_leviathan
    else:
        basis = BASIS_HEADER if s.baseline_ms_per_token else None
        c, leviathan = s.cost_ratio, s.speedup_predicted
    k = fig.k if s.rounds else None
    return {
        **sp.to_json(),
        "max_tokens_per_round": None if k is None else k + 1,
        "cost_ratio": c,
        "speedup_predicted": leviathan,
        "speedup_refined": fig.speedup_refined if probed else None,
        "speedup_refined_ci": (
            list(band) if probed and (band := refined_band(model, fig.k)) else None
        ),
        "refined_ratio": fig.refined_ratio if probed else None,
        "speedup_basis": basis,
        "window": {
            "first_round": first,
            "last_round": None if first is None else first + fig.rounds - 1,
            "rounds": fig.rounds,
            "probes": sp.probes,
            "baseline_steps": sp.steps,
            "context_len": costs.context_len,
        },
        "cost_model": figures_json(fig) if probed else None,
    }
