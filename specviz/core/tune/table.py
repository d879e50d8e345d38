"""A K sweep's table: a row per (drafter, policy, verifier, K), from the runs and one pooled
cost model.

Per K: alpha (accepted / judged, metrics.positions) and tokens per target pass (emitted /
rounds), measured; the measured speedup with its 95% interval (metrics.speedup: the sweep's
pooled T_t(1) steps against that K's rounds); the refined prediction from the pooled figures,
and Leviathan's, and measured / refined; and every metric of metrics.registry.SPECS over
that K's rounds (a row's `metrics`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from specviz.core.metrics.costmodel import (
    ADVISOR_KS,
    CostModel,
    Costs,
    acceptance_for,
    capped_ms,
    tree_refined,
)
from specviz.core.metrics.positions import position_counts
from specviz.core.metrics.registry import metrics_over
from specviz.core.metrics.running import predicted_speedup
from specviz.core.metrics.speedup import Speedup, measure
from specviz.core.trace.records import Round
from specviz.core.tune.promptsets import Prompt, categories
from specviz.core.tune.sweep import SweepRun, rule_fields


@dataclass(frozen=True)
class KRow:
    """One K of a sweep table (None where nothing was measured)."""

    k: int
    runs: int
    rounds: int
    alpha: float | None  # accepted / judged
    tokens_per_pass: float | None  # emitted tokens per target pass (per round)
    speedup: Speedup  # measured, with its interval and status
    speedup_refined: float | None
    speedup_leviathan: float | None
    drafter: str = "model"
    policy: str = "constant"
    verifier: str = "token"  # or a tree's label (core.tune.sweep.tree_label)
    pass_tokens: float | None = None  # tokens in a round's target pass: drafts + 1, mean
    metrics: dict[str, Any] = field(default_factory=dict)  # metrics.registry.SPECS, by name

    @property
    def speedup_measured(self) -> float | None:
        return self.speedup.shown

    @property
    def combo(self) -> tuple[str, str, str]:
        return self.drafter, self.policy, self.verifier

    @property
    def impossible(self) -> bool:
        return self.speedup.impossible

    @property
    def comparable(self) -> float | None:
        """The figure to rank K by: measured, or too noisy to tell alone (the table says
        so) but a figure; None when still measuring or impossible."""
        return self.speedup.value if self.speedup.status in ("ok", "noisy") else None

    @property
    def ratio(self) -> float | None:
        """measured / refined: 1.0 when the cost model explains the measurement."""
        return self.speedup.over(self.speedup_refined)

    def to_json(self) -> dict:
        return {
            "drafter": self.drafter,
            "policy": self.policy,
            "verifier": self.verifier,
            "k": self.k,
            "runs": self.runs,
            "rounds": self.rounds,
            "alpha": self.alpha,
            "tokens_per_pass": self.tokens_per_pass,
            "pass_tokens": self.pass_tokens,
            "speedup_measured": self.speedup_measured,
            "speedup_measured_raw": self.speedup.value,
            "speedup_ci": None if self.speedup.interval is None else list(self.speedup.interval),
            "speedup_status": self.speedup.status,
            "speedup_refined": self.speedup_refined,
            "speedup_leviathan": self.speedup_leviathan,
            "measured_over_refined": self.ratio,
            "impossible": self.impossible,
            "metrics": self.metrics,
        }


@dataclass(frozen=True)
class SweepTable:
    rows: tuple[KRow, ...]
    costs: Costs
    best_k: int | None  # the K of the best measured speedup (ok or too noisy alone: a figure)
    curve: tuple[tuple[int, float], ...]  # the advisor: refined prediction for K = 1..16
    advisor_best_k: int | None
    # (drafter, policy, verifier, K) of the best measured speedup; best_k is its K. With
    # several combinations the advisor's curve is that combination's (else the first's).
    best: tuple[str, str, str, int] | None = None


def _alpha_and_speedup(rounds: Sequence[Round], costs: Costs) -> tuple[float | None, Speedup]:
    """(accepted / judged, the measured speedup) of some rounds, against the baseline steps
    of `costs` (the sweep's pooled probes)."""
    capped = capped_ms([(r.n_drafted, r.ms) for r in rounds])
    speedup = measure(
        costs.t1_steps, [(t, r.n_emitted) for t, r in zip(capped, rounds, strict=True)]
    )
    return position_counts(rounds).acceptance, speedup


@dataclass(frozen=True)
class PromptRow:
    """One run (a prompt at a K) of a sweep: its own figures and its trace, if written."""

    prompt_index: int
    category: str
    k: int
    rounds: int
    alpha: float | None
    tokens_per_pass: float | None
    speedup: Speedup  # against the T_t(1) steps of the whole sweep's probes
    trace_path: str | None
    drafter: str = "model"
    policy: str = "constant"
    verifier: str = "token"

    @property
    def speedup_measured(self) -> float | None:
        return self.speedup.shown

    def to_json(self) -> dict:
        return {
            "drafter": self.drafter,
            "policy": self.policy,
            "verifier": self.verifier,
            "prompt": self.prompt_index,
            "category": self.category,
            "k": self.k,
            "rounds": self.rounds,
            "alpha": self.alpha,
            "tokens_per_pass": self.tokens_per_pass,
            "speedup_measured": self.speedup_measured,
            "speedup_ci": None if self.speedup.interval is None else list(self.speedup.interval),
            "speedup_status": self.speedup.status,
            "trace": self.trace_path,
        }


def prompt_rows(runs: Sequence[SweepRun], costs: Costs) -> list[PromptRow]:
    """One row per run, by prompt then K (costs: the whole sweep's, for T_t(1))."""
    rows = []
    for run in sorted(runs, key=lambda r: (r.prompt_index, *_combo(r), r.k)):
        alpha, measured = _alpha_and_speedup(run.rounds, costs)
        emitted = sum(r.n_emitted for r in run.rounds)
        per_pass = emitted / len(run.rounds) if run.rounds else None
        rows.append(
            PromptRow(
                run.prompt_index,
                run.category,
                run.k,
                len(run.rounds),
                alpha,
                per_pass,
                measured,
                run.trace_path,
                run.drafter,
                run.policy,
                run.verifier,
            )
        )
    return rows


def _combo(run: SweepRun) -> tuple[str, str, str]:
    return run.drafter, run.policy, run.verifier


def pooled_model(runs: Sequence[SweepRun]) -> CostModel:
    model = CostModel(window=None, probe_window=None)
    for run in runs:
        model.extend(run.rounds)
    return model


def sweep_table(runs: Sequence[SweepRun], costs: Costs | None = None) -> SweepTable:
    """The table of these runs, a row per (drafter, policy, verifier, K); costs default to those
    pooled over the same runs (pass the whole sweep's costs for a per-category table). The
    measured speedups share the table's T_t(1) (the target alone); with several
    combinations, each one's predictions use its own pooled acceptance and costs."""
    model = pooled_model(runs)
    costs = costs or model.costs()
    combos = sorted({_combo(run) for run in runs})
    rows, predictors = [], {}
    for combo in combos:
        combo_runs = [run for run in runs if _combo(run) == combo]
        if len(combos) == 1:
            c_model, c_costs = model, costs
        else:
            c_model = pooled_model(combo_runs)
            c_costs = c_model.costs()
        by_pos = c_model.acceptance_by_position()
        fig = c_model.figures()
        alpha_all = fig.alpha if fig.alpha is not None else 0.0
        predictors[combo] = (c_costs, by_pos, alpha_all)
        c = c_costs.cost_ratio
        for k in sorted({run.k for run in combo_runs}):
            rounds = [r for run in combo_runs if run.k == k for r in run.rounds]
            alpha, measured = _alpha_and_speedup(rounds, costs)
            tree = any(r.tree is not None for r in rounds)
            if tree:  # the chain's formulas do not hold (costmodel.tree_refined)
                folded = CostModel(window=None).extend(rounds).rounds
                refined, leviathan = tree_refined(list(folded), c_costs), None
            else:
                refined = c_costs.refined(acceptance_for(by_pos, k, alpha_all))
                leviathan = (
                    predicted_speedup(alpha, k, c) if alpha is not None and c is not None else None
                )
            rows.append(
                KRow(
                    k=k,
                    runs=sum(1 for run in combo_runs if run.k == k),
                    rounds=len(rounds),
                    alpha=alpha,
                    tokens_per_pass=(
                        sum(r.n_emitted for r in rounds) / len(rounds) if rounds else None
                    ),
                    speedup=measured,
                    speedup_refined=refined,
                    speedup_leviathan=leviathan,
                    drafter=combo[0],
                    policy=combo[1],
                    verifier=combo[2],
                    pass_tokens=(
                        sum(r.n_drafted + 1 for r in rounds) / len(rounds) if rounds else None
                    ),
                    metrics=metrics_over(rounds),
                )
            )
    possible = [r for r in rows if r.comparable is not None]
    best_row = max(possible, key=lambda r: r.comparable) if possible else None
    best = (*best_row.combo, best_row.k) if best_row else None
    curve_combo = best[:3] if best else (combos[0] if combos else None)
    curve: tuple[tuple[int, float], ...] = ()
    if curve_combo is not None and curve_combo[2] == rule_fields(curve_combo[2])["verifier"]:
        # the advisor's curve over K is a chain's (a tree's best K is swept, not predicted)
        c_costs, by_pos, alpha_all = predictors[curve_combo]
        curve = tuple(
            (k, v)
            for k in ADVISOR_KS
            if (v := c_costs.refined(acceptance_for(by_pos, k, alpha_all))) is not None
        )
    advisor = max(curve, key=lambda kv: kv[1])[0] if curve else None
    return SweepTable(tuple(rows), costs, best[3] if best else None, curve, advisor, best)


def shape_advice(table: SweepTable) -> list[str]:
    """Why the fastest shape is fastest, when chains and trees were swept: the best row of
    each kind, its tokens per target pass against its pass's cost T_t(n) (n tokens read)."""

    def rank(row: KRow) -> float:  # measured first; one still measuring after any figure
        return row.comparable if row.comparable is not None else -1.0

    best: dict[bool, KRow] = {}
    for row in table.rows:
        tree = rule_fields(row.verifier)["verifier"] != row.verifier
        if row.tokens_per_pass is not None and (tree not in best or rank(row) > rank(best[tree])):
            best[tree] = row
    if len(best) < 2:
        return []
    lines = []
    for row in sorted(best.values(), key=lambda r: -rank(r)):
        n = round(row.pass_tokens or 1)
        t_n = table.costs.t_target(n)
        rate = f"{row.tokens_per_pass / t_n:.3f}" if t_n and row.tokens_per_pass else "n/a"
        cost = f"{t_n:.2f} ms" if t_n else "n/a"
        lines.append(
            f"{row.verifier} K {row.k}: {row.tokens_per_pass or 0:.2f} tokens per target pass, "
            f"a pass over {n} tokens at T_t({n}) = {cost}: {rate} tokens per pass-ms "
            f"(measured {row.speedup.short()})"
        )
    return lines


def tables_by_category(runs: Sequence[SweepRun]) -> dict[str, SweepTable]:
    """ "overall" first, then one table per category (costs pooled over every run)."""
    overall = sweep_table(runs)
    out = {"overall": overall}
    cats = categories([Prompt(r.category, "") for r in runs])
    if len(cats) > 1:
        for cat in cats:
            name = cat if cat != "overall" else "overall (category)"
            out[name] = sweep_table([r for r in runs if r.category == cat], overall.costs)
    return out


def fastest_ms(runs) -> tuple[float | None, str]:
    """A sweep's fastest measured configuration: (ms per emitted token, what it was), from
    the overall table's best measured speedup and its T_t(1); (None, why) if none."""
    table = tables_by_category(runs)["overall"] if runs else None
    rows = [r for r in (table.rows if table else ()) if r.speedup.value and r.speedup.baseline_ms]
    if not rows:
        return None, "nothing measured"
    row = max(rows, key=lambda r: r.speedup.value)
    what = f"{row.drafter}/{row.policy}/{row.verifier} K {row.k}, target alone "
    what += f"{row.speedup.baseline_ms:.1f} ms/token, speedup {row.speedup.value:.2f}"
    return row.speedup.baseline_ms / row.speedup.value, what
