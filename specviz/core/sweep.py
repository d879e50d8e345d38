"""A K sweep: every prompt of a set at every K, interleaved, and its table.

Runs are interleaved (each prompt runs all its K in an order shuffled per prompt, from the
seed), so a slow spell of a busy machine falls on several K rather than on one. Each run is
a full speculative session with cost-model probes (core/probes.py); the table pools the
probes and the per-position acceptance of all runs into one cost model
(core/costmodel.py) and gives, per K:

- alpha (accepted / judged) and tokens per target pass (emitted / rounds), measured;
- measured speedup: T_t(1) x emitted / the rounds' time of that K's runs;
- the refined prediction from the pooled figures, and Leviathan's, and measured / refined.

Headless and thread-agnostic: the CLI runs it on the main thread, the Tune panel on a
worker thread; `cancel` (a threading.Event) is checked between rounds.
"""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from specviz.core.costmodel import ADVISOR_KS, CostModel, Costs, acceptance_for, capped_ms
from specviz.core.drafters import DrafterConfig
from specviz.core.greedycheck import GreedyDiff, check_greedy
from specviz.core.policies import PolicyConfig
from specviz.core.probes import ProbePlan, Prober
from specviz.core.promptsets import Prompt, categories
from specviz.core.session import Session
from specviz.core.stats import predicted_speedup
from specviz.core.trace import Round, SessionHeader, Settings, TokenEvent
from specviz.core.tracefile import save


@dataclass(frozen=True)
class SweepConfig:
    """What a sweep runs. Sampling settings are shared by every run."""

    ks: tuple[int, ...] = tuple(range(1, 9))
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    max_new_tokens: int = 64
    seed: int = 0  # each run's sampling seed, and the shuffling of the K orders
    probe_every: int = 4  # at least this many rounds between cost-model probes in a run
    check_greedy: bool = False  # greedy only: compare each run with the target alone
    # Who drafts and how K is chosen (core.drafters / core.policies); None: the draft
    # model and a constant K. With a policy that varies K, each swept K is its --k.
    drafter: DrafterConfig | None = None
    policy: PolicyConfig | None = None
    # Several (drafter, policy) combinations, each at every K (empty: just the one above).
    variants: tuple[tuple[DrafterConfig | None, PolicyConfig | None], ...] = ()

    def combos(self) -> tuple[tuple[DrafterConfig | None, PolicyConfig | None], ...]:
        return self.variants or ((self.drafter, self.policy),)

    def settings(self, k: int) -> Settings:
        s = Settings(
            k=k,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            seed=self.seed,
            max_new_tokens=self.max_new_tokens,
        )
        s.validate()
        return s


@dataclass(frozen=True)
class SweepRun:
    """One prompt at one K."""

    prompt_index: int
    category: str
    k: int
    rounds: tuple[Round, ...]  # without their top-N lists (those are in the trace)
    greedy_diff: GreedyDiff | None = None  # with check_greedy: None = identical
    trace_path: str | None = None  # with a trace folder: this run's trace
    drafter: str = "model"  # the drafter's and the policy's kinds
    policy: str = "constant"


@dataclass
class SweepResult:
    runs: list[SweepRun] = field(default_factory=list)
    total: int = 0  # runs planned
    cancelled: bool = False


def sweep_plan(n_prompts: int, ks: Sequence, seed: int = 0) -> list[tuple]:
    """(prompt index, K) in run order: prompt by prompt, each with all K shuffled (K may be
    any item, e.g. a (combination, K) pair)."""
    rng = random.Random(seed)
    plan = []
    for i in range(n_prompts):
        order = list(ks)
        rng.shuffle(order)
        plan.extend((i, k) for k in order)
    return plan


def kinds(drafter: DrafterConfig | None, policy: PolicyConfig | None) -> tuple[str, str]:
    """The (drafter, policy) kinds of a combination (None: the defaults)."""
    return (drafter or DrafterConfig()).kind, (policy or PolicyConfig()).kind


def run_one(
    pair, prompt: str, k: int, config: SweepConfig, cancel=None, full_probe: bool = True
) -> tuple[Round, ...]:
    """One session at K with probes; stops early (returns what it has) when cancelled.
    full_probe: T_t(n) for every n after round 0 (else the light probe: n = 1, K + 1 and one
    more in rotation)."""
    return run_session(pair, prompt, k, config, cancel, full_probe)[1]


def run_session(
    pair, prompt: str, k: int, config: SweepConfig, cancel=None, full_probe=True, trace=False
) -> tuple[SessionHeader, tuple[Round, ...]]:
    """run_one, with the session's header; trace=True records the top-N lists (the events'
    time is kept out of the rounds' verify_ms, so the timings stay comparable)."""
    from specviz.core.engine import SpeculativeEngine

    prober = Prober(ProbePlan(every=config.probe_every, full_first=full_probe))
    engine = SpeculativeEngine(
        pair,
        config.settings(k),
        trace=trace,
        drafter=config.drafter,
        policy=config.policy,
        prober=prober,
    )
    header = engine.prefill(prompt, calibrate=False)  # the probes are the calibration
    engine.probing = True
    rounds = []
    for rnd in engine.run():
        rounds.append(rnd)
        if cancel is not None and cancel.is_set():
            break
    return header, tuple(rounds)


def trace_name(prompt_index: int, category: str, k: int, variant: str = "") -> str:
    """A run's trace file name: prompt number (from 1), category (file-name safe), the
    variant if any (drafter-policy, when a sweep has several) and K."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", category).strip("_")[:40] or "prompt"
    middle = f"-{variant}" if variant else ""
    return f"p{prompt_index + 1:03d}-{safe}{middle}-k{k:02d}.jsonl"


def _light(rnd: Round) -> Round:
    """The round without its top-N lists (what the tables need; the trace has the rest)."""
    empty = {"top": (), "top_text": (), "residual_top": (), "residual_text": ()}
    tokens = tuple(TokenEvent(**{**vars(t), **empty}) for t in rnd.tokens)
    return replace(rnd, tokens=tokens)


def run_sweep(
    pair,
    prompts: Sequence[Prompt],
    config: SweepConfig,
    cancel: threading.Event | None = None,
    on_run: Callable[[int, int, SweepRun], None] | None = None,
    trace_dir: str | Path | None = None,
) -> SweepResult:
    """Every prompt at every K of config.ks. on_run(done, total, run) after each run (on the
    calling thread). A set `cancel` stops between rounds: the run in progress is dropped and
    the result is marked cancelled. trace_dir (an existing folder): each run records its
    top-N lists and is written there as a trace (trace_name) as soon as it finishes; the
    runs kept in memory drop the lists, so a long sweep's memory stays small."""

    combos = config.combos()
    items = [(c, k) for c in range(len(combos)) for k in config.ks]
    plan = sweep_plan(len(prompts), items, config.seed)
    result = SweepResult(total=len(plan))
    probed: set[int] = set()
    for i, (c, k) in plan:
        if cancel is not None and cancel.is_set():
            break
        prompt = prompts[i]
        drafter, policy = combos[c]
        d_kind, p_kind = kinds(drafter, policy)
        run_config = replace(config, drafter=drafter, policy=policy)
        # T_t(n) for every n once per prompt (the costs are pooled over the sweep).
        header, rounds = run_session(
            pair, prompt.text, k, run_config, cancel, i not in probed, trace=trace_dir is not None
        )
        probed.add(i)
        if cancel is not None and cancel.is_set():
            break
        path = None
        if trace_dir is not None:
            variant = f"{d_kind}-{p_kind}" if len(combos) > 1 else ""
            path = str(Path(trace_dir) / trace_name(i, prompt.category, k, variant))
            save(Session(header, list(rounds)), path)
            rounds = tuple(_light(r) for r in rounds)
        diff = None
        if config.check_greedy and config.temperature == 0 and rounds:
            emitted = [t.id for r in rounds for t in r.tokens if t.emitted]
            prompt_ids = pair.tokenizer(prompt.text)["input_ids"]
            diff = check_greedy(pair, prompt_ids, emitted)
        run = SweepRun(i, prompt.category, k, rounds, diff, path, d_kind, p_kind)
        result.runs.append(run)
        if on_run is not None:
            on_run(len(result.runs), result.total, run)
    result.cancelled = cancel is not None and cancel.is_set()
    return result


# ------------------------------------------------------------------------------------ table


@dataclass(frozen=True)
class KRow:
    """One K of a sweep table (None where nothing was measured)."""

    k: int
    runs: int
    rounds: int
    alpha: float | None  # accepted / judged
    tokens_per_pass: float | None  # emitted tokens per target pass (per round)
    speedup_measured: float | None
    speedup_refined: float | None
    speedup_leviathan: float | None
    impossible: bool  # measured above K + 1: not to be believed
    drafter: str = "model"
    policy: str = "constant"

    @property
    def ratio(self) -> float | None:
        """measured / refined: 1.0 when the cost model explains the measurement."""
        if self.speedup_measured is None or not self.speedup_refined:
            return None
        return self.speedup_measured / self.speedup_refined

    def to_json(self) -> dict:
        return {
            "drafter": self.drafter,
            "policy": self.policy,
            "k": self.k,
            "runs": self.runs,
            "rounds": self.rounds,
            "alpha": self.alpha,
            "tokens_per_pass": self.tokens_per_pass,
            "speedup_measured": self.speedup_measured,
            "speedup_refined": self.speedup_refined,
            "speedup_leviathan": self.speedup_leviathan,
            "measured_over_refined": self.ratio,
            "impossible": self.impossible,
        }


@dataclass(frozen=True)
class SweepTable:
    rows: tuple[KRow, ...]
    costs: Costs
    best_k: int | None  # the K of the best measured speedup (a possible one)
    curve: tuple[tuple[int, float], ...]  # the advisor: refined prediction for K = 1..16
    advisor_best_k: int | None
    # (drafter, policy, K) of the best measured speedup; best_k is its K. With several
    # combinations the advisor's curve is that combination's (else the first's).
    best: tuple[str, str, int] | None = None


def _alpha_and_speedup(rounds: Sequence[Round], t1: float | None):
    """(accepted / judged, T_t(1) x emitted / the rounds' time) of some rounds."""
    emitted = sum(r.n_emitted for r in rounds)
    ms = sum(capped_ms([(r.n_drafted, r.ms) for r in rounds]))
    judged = [t.status for r in rounds for t in r.tokens if t.status in ("accepted", "rejected")]
    alpha = judged.count("accepted") / len(judged) if judged else None
    return alpha, (t1 * emitted / ms if t1 and ms > 0 and emitted else None)


@dataclass(frozen=True)
class PromptRow:
    """One run (a prompt at a K) of a sweep: its own figures and its trace, if written."""

    prompt_index: int
    category: str
    k: int
    rounds: int
    alpha: float | None
    tokens_per_pass: float | None
    speedup_measured: float | None  # with the T_t(1) of the whole sweep's costs
    trace_path: str | None
    drafter: str = "model"
    policy: str = "constant"

    def to_json(self) -> dict:
        return {
            "drafter": self.drafter,
            "policy": self.policy,
            "prompt": self.prompt_index,
            "category": self.category,
            "k": self.k,
            "rounds": self.rounds,
            "alpha": self.alpha,
            "tokens_per_pass": self.tokens_per_pass,
            "speedup_measured": self.speedup_measured,
            "trace": self.trace_path,
        }


def prompt_rows(runs: Sequence[SweepRun], costs: Costs) -> list[PromptRow]:
    """One row per run, by prompt then K (costs: the whole sweep's, for T_t(1))."""
    rows = []
    for run in sorted(runs, key=lambda r: (r.prompt_index, r.drafter, r.policy, r.k)):
        alpha, measured = _alpha_and_speedup(run.rounds, costs.t_target(1))
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
            )
        )
    return rows


def pooled_model(runs: Sequence[SweepRun]) -> CostModel:
    model = CostModel(window=None, probe_window=None)
    for run in runs:
        model.extend(run.rounds)
    return model


def sweep_table(runs: Sequence[SweepRun], costs: Costs | None = None) -> SweepTable:
    """The table of these runs, a row per (drafter, policy, K); costs default to those
    pooled over the same runs (pass the whole sweep's costs for a per-category table). The
    measured speedups share the table's T_t(1) (the target alone); with several
    combinations, each one's predictions use its own pooled acceptance and costs."""
    model = pooled_model(runs)
    costs = costs or model.costs()
    t1 = costs.t_target(1)
    combos = sorted({(run.drafter, run.policy) for run in runs})
    rows, predictors = [], {}
    for combo in combos:
        combo_runs = [run for run in runs if (run.drafter, run.policy) == combo]
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
            alpha, measured = _alpha_and_speedup(rounds, t1)
            rows.append(
                KRow(
                    k=k,
                    runs=sum(1 for run in combo_runs if run.k == k),
                    rounds=len(rounds),
                    alpha=alpha,
                    tokens_per_pass=(
                        sum(r.n_emitted for r in rounds) / len(rounds) if rounds else None
                    ),
                    speedup_measured=measured,
                    speedup_refined=c_costs.refined(acceptance_for(by_pos, k, alpha_all)),
                    speedup_leviathan=(
                        predicted_speedup(alpha, k, c)
                        if alpha is not None and c is not None
                        else None
                    ),
                    impossible=measured is not None and measured > k + 1,
                    drafter=combo[0],
                    policy=combo[1],
                )
            )
    possible = [r for r in rows if r.speedup_measured is not None and not r.impossible]
    best_row = max(possible, key=lambda r: r.speedup_measured) if possible else None
    best = (best_row.drafter, best_row.policy, best_row.k) if best_row else None
    curve_combo = best[:2] if best else (combos[0] if combos else None)
    curve: tuple[tuple[int, float], ...] = ()
    if curve_combo is not None:
        c_costs, by_pos, alpha_all = predictors[curve_combo]
        curve = tuple(
            (k, v)
            for k in ADVISOR_KS
            if (v := c_costs.refined(acceptance_for(by_pos, k, alpha_all))) is not None
        )
    advisor = max(curve, key=lambda kv: kv[1])[0] if curve else None
    return SweepTable(tuple(rows), costs, best[2] if best else None, curve, advisor, best)


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
