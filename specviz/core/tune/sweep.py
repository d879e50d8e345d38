"""A K sweep: every prompt of a set at every K, interleaved (its table: core.tune.table).

Runs are interleaved (each prompt runs all its K in an order shuffled per prompt, from the
seed), so a slow spell of a busy machine falls on several K rather than on one. Each run is
a full speculative session with cost-model probes (core.engine.cost_probes); the table
pools the probes and the per-position acceptance of all runs into one cost model
(core.metrics.costmodel).

Headless and thread-agnostic: the CLI runs it on the main thread, the Tune panel on a
worker thread; `cancel` (a threading.Event) is checked between rounds.
"""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from specviz.core.decoding.greedy_check import GreedyDiff, check_greedy
from specviz.core.decoding.k_policy import PolicyConfig
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.engine.cost_probes import ProbePlan, Prober
from specviz.core.host import opening
from specviz.core.metrics.running import summary
from specviz.core.trace.files import save
from specviz.core.trace.records import Round, SessionHeader, Settings, TokenEvent
from specviz.core.trace.session import Session
from specviz.core.tune.promptsets import Prompt

# The Settings fields a sweep sets in each run itself: K (one of its `ks`) and the rule (its
# `verifier` label: a chain verifier, or a tree's width and budget). Every other field of
# SweepConfig.settings is shared by all its runs.
PER_RUN = ("k", "verifier", "tree_width", "tree_budget")


def shared_fields() -> tuple[str, ...]:
    """The Settings fields a sweep's runs share (all but PER_RUN), in Settings' order."""
    return tuple(f.name for f in fields(Settings) if f.name not in PER_RUN)


@dataclass(frozen=True)
class SweepConfig:
    """What a sweep runs."""

    ks: tuple[int, ...] = tuple(range(1, 9))
    # The session settings every run shares (sampling, length, seed, the trees' draw and
    # shape, ...); each run's K and rule (PER_RUN) come from `ks` and `verifier` instead.
    # The seed is each run's sampling seed, and the shuffling of the K orders.
    settings: Settings = Settings()
    probe_every: int = 4  # at least this many rounds between cost-model probes in a run
    check_greedy: bool = False  # greedy only: compare each run with the target alone
    # How each run drafts and judges: a chain verifier (trace Settings.verifier), or a token
    # tree's label (tree_label: "tree2x16", width x budget, judged by the rule "tree").
    verifier: str = "token"
    # Several of them, each with every combination at every K (empty: just the one above).
    verifiers: tuple[str, ...] = ()
    # Who drafts and how K is chosen (core.drafters / core.decoding.k_policy); None: the draft
    # model and a constant K. With a policy that varies K, each swept K is its --k.
    drafter: DrafterConfig | None = None
    policy: PolicyConfig | None = None
    # Several (drafter, policy) combinations, each at every K (empty: just the one above).
    variants: tuple[tuple[DrafterConfig | None, PolicyConfig | None], ...] = ()

    def combos(self) -> tuple[tuple[DrafterConfig | None, PolicyConfig | None, str], ...]:
        """Every (drafter, policy, verifier) the sweep runs at each K; with several drafters,
        a tree goes to those that draft trees (DrafterSpec.drafts_trees) only."""
        pairs = self.variants or ((self.drafter, self.policy),)
        combos = [(d, p, v) for v in self.verifiers or (self.verifier,) for d, p in pairs]
        if len(pairs) > 1:
            chains = {v for v in self.verifiers or (self.verifier,) if not _TREE_LABEL.fullmatch(v)}
            combos = [
                c for c in combos if c[2] in chains or (c[0] or DrafterConfig()).spec.drafts_trees
            ]
        return tuple(combos)

    def n_runs(self, n_prompts: int) -> int:
        """The runs a sweep of n_prompts prompts makes: each at every combination and K."""
        return n_prompts * len(self.combos()) * len(self.ks)

    def run_settings(self, k: int) -> Settings:
        """A run's Settings at K: the shared ones, K and the rule of `verifier` (PER_RUN's
        other fields at their defaults, as a sweep's request carries none of them)."""
        defaults = Settings()
        per_run = {name: getattr(defaults, name) for name in PER_RUN}
        s = replace(self.settings, **{**per_run, "k": k, **rule_fields(self.verifier)})
        s.validate()
        return s


def tree_label(width: int, budget: int) -> str:
    """A sweep's name for a token tree shape: "tree2x16" (width 2, at most 16 nodes)."""
    return f"tree{width}x{budget}"


_TREE_LABEL = re.compile(r"tree([0-9]+)x([0-9]+)")


def rule_fields(label: str) -> dict:
    """The Settings fields of a sweep's rule: a chain verifier's name, or a tree_label."""
    match = _TREE_LABEL.fullmatch(label)
    if match is None:
        return {"verifier": label}
    return {"verifier": "tree", "tree_width": int(match[1]), "tree_budget": int(match[2])}


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
    verifier: str = "token"


@dataclass
class SweepResult:
    runs: list[SweepRun] = field(default_factory=list)
    total: int = 0  # runs planned
    cancelled: bool = False
    # (trace file name, why) of each run whose trace could not be written (a full disk, a
    # folder made read-only meanwhile): the run itself is kept in the tables
    trace_errors: list[tuple[str, str]] = field(default_factory=list)


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
    pair,
    prompt: str,
    k: int,
    config: SweepConfig,
    cancel=None,
    full_probe=True,
    trace=False,
    probe: bool = True,
    prompt_ids: list[int] | None = None,
    watch_greedy: bool = True,
) -> tuple[SessionHeader, tuple[Round, ...]]:
    """run_one, with the session's header; trace=True records the top-N lists (the events'
    time is kept out of the rounds' verify_ms, so the timings stay comparable). probe=False:
    no cost-model probes (a session timed whole, as `specviz bench` times it); prompt_ids:
    the prompt's tokens as given (a later turn: the earlier turns' own tokens kept);
    watch_greedy: the engine's (bench, which times sessions whole, turns it off)."""
    engine = open_session(pair, prompt, k, config, full_probe, trace, probe, prompt_ids,
                          watch_greedy)  # fmt: skip
    rounds = []
    for rnd in engine.run():
        rounds.append(rnd)
        if cancel is not None and cancel.is_set():
            break
    return engine.header, tuple(rounds)


def open_session(
    pair,
    prompt: str,
    k: int,
    config: SweepConfig,
    full_probe=True,
    trace=False,
    probe: bool = True,
    prompt_ids: list[int] | None = None,
    watch_greedy: bool = True,
):
    """A run's session (core.engine.speculative.SpeculativeEngine), opened by the session
    host's opener (core.host.opening) with its prompt read (run_session's arguments); its
    run() gives the rounds."""
    prober = Prober(ProbePlan(every=config.probe_every, full_first=full_probe))
    return opening.open_session(
        pair,
        prompt,
        config.run_settings(k),
        (config.drafter, config.policy),
        calibrate=False,  # the probes calibrate
        trace=trace,
        prompt_ids=prompt_ids,
        prober=prober,
        probing=probe,
        watch_greedy=watch_greedy,
    )


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
    result = SweepResult(total=config.n_runs(len(prompts)))
    stopped = cancel.is_set if cancel is not None else lambda: False
    steps = sweep_steps(pair, prompts, config, record=trace_dir is not None)
    for finished in () if stopped() else steps:
        if finished is not None:
            header, run = finished
            if trace_dir is not None:
                run = keep_trace(result, header, run, trace_dir, config)
            result.runs.append(run)
            if on_run is not None:
                on_run(len(result.runs), result.total, run)
        if stopped():
            break
    result.cancelled = stopped()
    return result


def sweep_steps(
    pair, prompts: Sequence[Prompt], config: SweepConfig, record: bool = False
) -> Iterator[tuple[SessionHeader, SweepRun] | None]:
    """The sweep a round at a time, for a caller that may stop between any two rounds
    (run_sweep; a served engine's sweep, remote/sweeps.py): None after each round, then
    (its session's header, the SweepRun) as each run finishes. Stopping drops the run in
    progress. record: the rounds carry their top-N lists (for the runs' traces)."""
    combos = config.combos()
    items = [(c, k) for c in range(len(combos)) for k in config.ks]
    probed: set[int] = set()
    for i, (c, k) in sweep_plan(len(prompts), items, config.settings.seed):
        prompt = prompts[i]
        drafter, policy, verifier = combos[c]
        d_kind, p_kind = kinds(drafter, policy)
        run_config = replace(config, drafter=drafter, policy=policy, verifier=verifier)
        # T_t(n) for every n once per prompt (the costs are pooled over the sweep).
        engine = open_session(pair, prompt.text, k, run_config, i not in probed, trace=record)
        probed.add(i)
        rounds = []
        for rnd in engine.run():
            rounds.append(rnd)
            yield None
        diff = None
        if config.check_greedy and config.settings.temperature == 0 and rounds:
            emitted = [t.id for r in rounds for t in r.tokens if t.emitted]
            prompt_ids = pair.tokenizer(prompt.text)["input_ids"]
            diff = check_greedy(pair, prompt_ids, emitted)
        run = SweepRun(i, prompt.category, k, tuple(rounds), diff, None, d_kind, p_kind, verifier)
        yield engine.header, run


def keep_trace(
    result: SweepResult, header: SessionHeader, run: SweepRun, trace_dir, config: SweepConfig
) -> SweepRun:
    """Write a finished run (its rounds with their top-N lists) as a trace in trace_dir,
    named by trace_name; the run with its trace_path and without the lists. A trace that
    cannot be written (a full disk) goes to result.trace_errors and the run is kept."""
    variant = ""
    if len(config.combos()) > 1:
        variant = f"{run.drafter}-{run.policy}"
        if len(config.verifiers) > 1:
            variant += f"-{run.verifier}"
    path = str(Path(trace_dir) / trace_name(run.prompt_index, run.category, run.k, variant))
    swept = Session(header, list(run.rounds))
    try:
        save(swept, path, summary(swept))  # atomic: nothing half-written is left
    except OSError as e:
        result.trace_errors.append((Path(path).name, e.strerror or str(e)))
        path = None
    return replace(run, rounds=tuple(_light(r) for r in run.rounds), trace_path=path)
