"""The numbers specviz shows, computed from round records only.

- acceptance rate: accepted / judged drafted tokens (discarded ones were never judged);
  it estimates alpha = E[sum_x min(p(x), q(x))], which is averaged over judged positions.
- draft efficiency: accepted / all drafted tokens (vLLM's "draft acceptance rate").
- measured speedup: target-only ms per token / speculative ms per emitted token. RunningStats
  divides by the header's baseline (measured once, at session start); `summary` takes the
  cost model's (core/metrics/costmodel.py: the running median of the probes' T_t(1), over a window
  of rounds) and falls back to the header's only for a trace without probes (schema 1.0).
- predicted speedup, Leviathan et al. 2023 (arXiv:2211.17192) eq. 1:
  (1 - a^(K+1)) / ((1 - a)(K c + 1)); `summary` adds the cost model's refined prediction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specviz.core.metrics.costmodel import figures, figures_json, predicted_speedup, round_k
from specviz.core.trace.records import DRAFTED, JUDGED, Round, SessionHeader, cost_ratio
from specviz.core.trace.session import Session

WINDOW = 64  # rounds the summary's cost-model figures come from (as the window's Tune panel)
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
    speedup_measured: float | None
    speedup_predicted: float | None
    cost_ratio: float | None  # c


@dataclass
class RunningStats:
    """Folds rounds one at a time; O(1) work per round, whatever the session length."""

    baseline_ms_per_token: float | None
    draft_ms_per_token: float | None
    rounds: int = 0
    drafted: int = 0
    judged: int = 0
    accepted: int = 0
    emitted: int = 0
    ms: float = 0.0
    alpha_sum: float = 0.0
    alpha_n: int = 0
    k_sum: int = 0
    by_position_judged: list[int] = field(default_factory=list)
    by_position_accepted: list[int] = field(default_factory=list)
    # How many rounds kept 0, 1, 2, ... drafts
    accepted_lengths: list[int] = field(default_factory=list)

    @classmethod
    def for_header(cls, header: SessionHeader) -> RunningStats:
        return cls(header.baseline_ms_per_token, header.draft_ms_per_token)

    @property
    def cost_ratio(self) -> float | None:
        return cost_ratio(self.baseline_ms_per_token, self.draft_ms_per_token)

    def add(self, rnd: Round) -> RoundStats:
        """Fold one round in. Counts come from its tokens, so that the work and the memory
        stay bounded by the record whatever its n_drafted / n_accepted say."""
        judged = [t for t in rnd.tokens if t.status in JUDGED]
        alphas = [t.alpha for t in judged if t.alpha is not None]
        n_acc = sum(1 for t in judged if t.status == "accepted")
        n_drafted = sum(1 for t in rnd.tokens if t.status in DRAFTED)
        self.rounds += 1
        self.drafted += n_drafted
        self.judged += len(judged)
        self.accepted += n_acc
        self.emitted += rnd.n_emitted
        self.ms += rnd.ms
        self.alpha_sum += sum(alphas)
        self.alpha_n += len(alphas)
        self.k_sum += n_drafted
        for pos, t in enumerate(judged):
            while len(self.by_position_judged) <= pos:
                self.by_position_judged.append(0)
                self.by_position_accepted.append(0)
            self.by_position_judged[pos] += 1
            self.by_position_accepted[pos] += t.status == "accepted"
        while len(self.accepted_lengths) <= n_acc:
            self.accepted_lengths.append(0)
        self.accepted_lengths[n_acc] += 1
        return RoundStats(
            index=rnd.index,
            n_drafted=rnd.n_drafted,
            n_accepted=rnd.n_accepted,
            n_emitted=rnd.n_emitted,
            acceptance=n_acc / len(judged) if judged else None,
            alpha=sum(alphas) / len(alphas) if alphas else None,
            acceptance_running=self.acceptance,
            alpha_running=self.alpha,
            draft_efficiency=self.draft_efficiency,
            tokens_per_forward=self.emitted / self.rounds,
            tokens_per_s=1000 * self.emitted / self.ms if self.ms > 0 else None,
            speedup_measured=self.speedup_measured,
            speedup_predicted=self.speedup_predicted,
            cost_ratio=self.cost_ratio,
        )

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.judged if self.judged else None

    @property
    def alpha(self) -> float | None:
        return self.alpha_sum / self.alpha_n if self.alpha_n else None

    @property
    def draft_efficiency(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    @property
    def speedup_measured(self) -> float | None:
        if not self.baseline_ms_per_token or not self.emitted or self.ms <= 0:
            return None
        return self.baseline_ms_per_token / (self.ms / self.emitted)

    @property
    def speedup_predicted(self) -> float | None:
        c, alpha = self.cost_ratio, self.alpha
        if c is None or alpha is None or not self.rounds:
            return None
        return predicted_speedup(alpha, self.k_sum / self.rounds, c)

    @property
    def acceptance_by_position(self) -> list[float | None]:
        return [
            a / j if j else None
            for a, j in zip(self.by_position_accepted, self.by_position_judged, strict=True)
        ]


def fold(session: Session) -> RunningStats:
    stats = RunningStats.for_header(session.header)
    for rnd in session.rounds:
        stats.add(rnd)
    return stats


def summary(session: Session, window: int = WINDOW) -> dict:
    """The summary line of a trace and of `specviz run` / `specviz inspect`.

    The speedup figures (baseline_ms_per_token, cost_ratio, speedup_*) come from the cost
    model over the last `window` rounds when the rounds carry probes, else from the header
    (speedup_basis says which). speedup_measured is None when it is impossible (above the
    K + 1 tokens a round can emit); speedup_measured_raw keeps the figure that was computed."""
    s = fold(session)
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
        "ms_per_token": s.ms / s.emitted if s.emitted else None,
        **speedup_figures(session, s, window),
    }


def speedup_figures(session: Session, s: RunningStats, window: int = WINDOW) -> dict[str, Any]:
    """The summary's speedup keys: the cost model's figures where the rounds carry probes;
    for a trace without any (schema 1.0) the header's baseline over the whole session."""
    rounds = session.rounds
    if any(rnd.probes for rnd in rounds):
        fig = figures(rounds, window)
        costs = fig.costs
        raw, k = fig.speedup_measured, fig.k
        first = fig.first_round
        figs = {
            "baseline_ms_per_token": costs.t_target(1),
            "cost_ratio": costs.cost_ratio,
            "speedup_predicted": fig.speedup_leviathan,
            "speedup_refined": fig.speedup_refined,
            "speedup_basis": BASIS_PROBES,
            "window": {
                "first_round": first,
                "last_round": None if first is None else first + fig.rounds - 1,
                "rounds": fig.rounds,
                "probes": costs.counts.get(1, 0),  # T_t(1) probes in the running median
                "context_len": costs.context_len,
            },
            "cost_model": figures_json(fig),
        }
    else:
        raw = s.speedup_measured
        k = max((round_k(rnd) for rnd in rounds), default=None)
        figs = {
            "baseline_ms_per_token": s.baseline_ms_per_token,
            "cost_ratio": s.cost_ratio,
            "speedup_predicted": s.speedup_predicted,
            "speedup_refined": None,
            "speedup_basis": BASIS_HEADER if s.baseline_ms_per_token else None,
            "window": {
                "first_round": 0 if rounds else None,
                "last_round": len(rounds) - 1 if rounds else None,
                "rounds": len(rounds),
                "probes": 0,
                "context_len": None,
            },
            "cost_model": None,
        }
    impossible = raw is not None and k is not None and raw > k + 1
    return {
        "speedup_measured": None if impossible else raw,
        "speedup_measured_raw": raw,
        "speedup_impossible": impossible,
        "max_tokens_per_round": None if k is None else k + 1,
        **figs,
    }
