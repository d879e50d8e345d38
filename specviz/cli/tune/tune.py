"""`specviz tune`: which K is fastest for a pair on this machine, and why.

Runs every prompt of a set at every K of a range, and at every drafter and policy given
(comma-separated lists), interleaved (the (drafter, policy, K) orders shuffled per prompt),
with cost-model probes, and prints per category and overall: drafter, policy, K, alpha,
tokens per target pass, the measured speedup, the refined and Leviathan predictions,
measured / refined, the best measured combination and the advisor's K (the refined
prediction for K = 1..16, of the best combination). With --from-trace
it reads a trace instead (no models): the cost-model figures, the advisor and, as an
estimate, the acceptance a smaller K would have seen.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from specviz.cli.drafting_options import (
    add_drafter_options,
    add_tree_sweep_args,
    drafting_lists,
    pair_spec,
    rule_list,
)
from specviz.cli.options import UsageError, add_model_args, fail, interruptible
from specviz.cli.tune.export_config import ENGINES
from specviz.core.engine.threads import set_threads


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "tune", help="sweep K (and drafters, policies) on a prompt set: which is fastest, and why"
    )
    parser.description = __doc__
    add_model_args(parser, dtype_lists=True)
    group = parser.add_argument_group("sweep")
    group.add_argument(
        "--prompts", help="JSONL ({'category', 'prompt'} a line) or text file, one prompt a line "
        "(default: the shipped set, resources/prompts/tune.jsonl)",
    )  # fmt: skip
    group.add_argument("--k", default="1-8", help="K values: 1-8, 1,2,4 or 4 (default 1-8)")
    group.add_argument("--temperature", type=float, default=1.0, help="0 = greedy (default 1)")
    group.add_argument("--top-k", type=int, default=0, help="0 = off (default)")
    group.add_argument("--top-p", type=float, default=1.0, help="1.0 = off (default)")
    group.add_argument("--max-new-tokens", type=int, default=64, help="per run (default 64)")
    parser.add_argument(
        "--export",
        choices=ENGINES,
        help="end with the best configuration in that engine's own form (and what does not "
        "carry over)",
    )
    group.add_argument(
        "--verifier",
        default="token",
        help="how each run judges its drafts: token (default), block (Sun et al. 2024), or "
        "both as token,block, each swept like the drafters",
    )
    add_tree_sweep_args(group)
    group.add_argument("--seed", type=int, default=0, help="sampling seed and K order")
    group.add_argument("--limit", type=int, help="use only the first N prompts")
    group.add_argument(
        "--check-greedy", action="store_true",
        help="with --temperature 0: compare each run with the target's own greedy decoding",
    )  # fmt: skip
    group.add_argument("--from-trace", metavar="TRACE", help="figures from a trace, no models")
    group.add_argument(
        "--traces", metavar="DIR",
        help="write each run's trace to DIR (created if missing), named pNNN-CATEGORY-kKK.jsonl "
        "(pNNN-CATEGORY-DRAFTER-POLICY-kKK.jsonl when several drafters or policies are swept)",
    )  # fmt: skip
    group.add_argument("--json", action="store_true", help="print one JSON object")
    add_drafter_options(parser, lists=True)


def parse_ks(text: str) -> tuple[int, ...]:
    """'1-8', '1,2,4', '4' -> sorted distinct K in 1..32."""
    ks: set[int] = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if lo > hi:
                    raise UsageError(f"--k: {part} runs backwards (write {hi}-{lo})")
                ks.update(range(lo, hi + 1))
            else:
                ks.add(int(part))
    except ValueError:
        raise UsageError(f"--k: expected a range (1-8) or a list (1,2,4), got {text!r}") from None
    if not ks or min(ks) < 1 or max(ks) > 32:
        raise UsageError(f"--k: K must be between 1 and 32, got {text!r}")
    return tuple(sorted(ks))


def _f(value, fmt="{:.2f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def plain(text: str) -> str:
    """Text from a file, safe on a terminal: control characters escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def format_table(name: str, table) -> str:
    lines = [
        f"== {plain(name)}",
        f"  {'drafter':<10s}  {'policy':<9s}  {'verifier':<8s}   K   alpha  tok/pass  "
        f"{'measured [95%]':<20s}   refined  Leviathan  meas/ref",
    ]
    for r in table.rows:
        lines.append(
            f"  {r.drafter:<10s}  {r.policy:<9s}  {r.verifier:<8s}  {r.k:2d}  "
            f"{_f(r.alpha, '{:6.3f}')}"
            f"  {_f(r.tokens_per_pass, '{:8.2f}')}  {r.speedup.short():<20s}"
            f"  {_f(r.speedup_refined, '{:7.2f}x')}"
            f"  {_f(r.speedup_leviathan, '{:8.2f}x')}  {_f(r.ratio, '{:8.2f}')}"
        )
    best = [r for r in table.rows if table.best and (*r.combo, r.k) == table.best]
    noisy = (
        " (too noisy to tell alone on this machine: compare the intervals)"
        if any(r.speedup.status == "noisy" for r in best)
        else ""
    )
    lines.append(f"  best measured K: {_f(table.best_k, '{}')}{noisy}")
    if table.best is not None:
        drafter, policy, verifier, k = table.best
        lines.append(
            f"  best measured: drafter {drafter}, policy {policy}, verifier {verifier}, K {k}"
        )
    return "\n".join(lines)


def format_costs(costs) -> str:
    return (
        f"costs (running medians of the probes): T_t(1) {_f(costs.t_target(1), '{:.2f}')} ms, "
        f"T_d(1) {_f(costs.draft, '{:.2f}')} ms, c {_f(costs.cost_ratio, '{:.3f}')}, "
        f"o {_f(costs.overhead0, '{:.2f}')} + {costs.overhead1:.2f} K ms, "
        f"{costs.n_probes} probes"
    )


def format_advisor(curve, best) -> str:
    if not curve:  # a tree was fastest (its K is swept, not predicted), or nothing measured
        return "advisor (refined prediction over K): n/a (a chain's only)"
    points = "  ".join(f"{k}:{v:.2f}" for k, v in curve)
    return f"advisor (refined prediction, K:speedup): {points}\nadvisor's best K: {_f(best, '{}')}"


def _table_json(table) -> dict:
    return {
        "runs": [r.to_json() for r in table.rows],
        "best_k": table.best_k,
        "best": (
            dict(zip(("drafter", "policy", "verifier", "k"), table.best, strict=True))
            if table.best is not None
            else None
        ),
        "advisor": {"curve": [list(kv) for kv in table.curve], "best_k": table.advisor_best_k},
    }


def _costs_json(costs) -> dict:
    return {
        "t_target_ms": {str(n): ms for n, ms in costs.target.items()},
        "t_draft_ms": costs.draft,
        "overhead_ms": [costs.overhead0, costs.overhead1],
        "cost_ratio": costs.cost_ratio,
        "probes": costs.n_probes,
    }


def _note_shared_cache(config) -> None:
    """Say so when a suffix drafter with a cache runs one prompt more than once: its later
    runs read what its earlier ones wrote (the same text), and draft more than on a new
    prompt."""
    runs = [c for c in config.combos() if c[0] is not None and c[0].kind == "suffix"]
    if any(d.param("suffix_cache") for d, _, _ in runs) and len(runs) * len(config.ks) > 1:
        print("[specviz] note: the suffix drafter's runs of one prompt share its cache of "
              "earlier outputs, so a later run reads an earlier one's text; --suffix-cache 0 "
              "compares them on each request alone", file=sys.stderr)  # fmt: skip


def run(args: argparse.Namespace) -> int:
    if args.from_trace:
        from specviz.cli.tune.tune_trace import run_from_trace

        return run_from_trace(args)
    from specviz.core.trace.records import Settings
    from specviz.core.tune.promptsets import PromptSetError, chat_prompts, load_prompt_set
    from specviz.core.tune.sweep import SweepConfig

    try:
        ks = parse_ks(args.k)
        drafters, policies = drafting_lists(args)
        verifiers = rule_list(args)
        variants = tuple((d, p) for d in drafters for p in policies)
        config = SweepConfig(
            drafter=drafters[0],
            policy=policies[0],
            variants=variants if len(variants) > 1 else (),
            ks=ks,
            settings=Settings(
                temperature=args.temperature,
                top_k=args.top_k,
                top_p=args.top_p,
                max_new_tokens=args.max_new_tokens,
                seed=args.seed,
                tree_draw=args.tree_draw,
                tree_shape=args.tree_shape,
            ),
            check_greedy=args.check_greedy,
            verifier=verifiers[0],
            verifiers=verifiers if len(verifiers) > 1 else (),
        )
        config.run_settings(ks[0])  # sampling settings a user can fix
        if args.check_greedy and args.temperature != 0:
            raise UsageError("--check-greedy needs --temperature 0")
        if args.limit is not None and args.limit < 1:
            raise UsageError("--limit must be >= 1")
        prompts = load_prompt_set(args.prompts)[: args.limit]
        _note_shared_cache(config)
        trace_dir = traces_folder(args.traces)
        spec = pair_spec(args, _pair_drafter(args, drafters))
    except (UsageError, PromptSetError, ValueError) as e:
        return fail(str(e))

    def progress(message: str) -> None:
        print(f"[specviz] {plain(message)}", file=sys.stderr, flush=True)

    from specviz.core.models.pair import ModelLoadError

    set_threads(args.threads)
    dtypes = args.dtype or (spec.options.dtype,)
    probe_k = sorted(ks)[len(ks) // 2]  # --dtype auto probes for the sweep's middle K
    by_dtype = {}
    for dtype in dict.fromkeys(dtypes):  # each dtype once, in the order given
        options = dataclasses.replace(spec.options, dtype=dtype, dtype_k=probe_k)
        try:
            pair = dataclasses.replace(spec, options=options).load(progress)
        except ModelLoadError as e:
            return fail(str(e))
        try:  # the prompts as chat turns for an instruct target (core.models.chat)
            turns = chat_prompts(prompts, pair, args.chat, progress)
        except ValueError as e:
            return fail(str(e))
        result = sweep(pair, turns, config, progress, trace_dir)
        pair = None  # the next dtype's pair loads in its place
        if len(dtypes) > 1 and not args.json:
            print(f"== dtype {dtype} ==")
        args.exported = _export(args, result, drafters, policies, spec.draft)
        sink = [] if len(dtypes) > 1 else None
        print_result(args, result, spec.target, spec.draft, sink)
        if sink is not None:
            by_dtype[dtype] = (result, sink[0] if sink else None)
        if result.cancelled:
            break
    if by_dtype:
        print_dtypes(args, by_dtype, spec.target, spec.draft)
    if result.trace_errors:  # the tables above are kept; these runs have no trace
        for name, why in result.trace_errors:
            print(f"specviz: error: {plain(name)} was not written: {plain(why)}", file=sys.stderr)
        n = len(result.trace_errors)
        print(
            f"specviz: error: {n} run trace{'s' if n != 1 else ''} not written to "
            f"{plain(args.traces)}; the tables above include those runs",
            file=sys.stderr,
        )
        return 2
    return 130 if result.cancelled else 0


def print_dtypes(args, by_dtype: dict, target: str, draft: str) -> None:
    """--dtype float32,bfloat16: each dtype's fastest configuration, in ms per token."""
    from specviz.core.tune.table import fastest_ms

    best = {dtype: fastest_ms(result.runs) for dtype, (result, _) in by_dtype.items()}
    timed = {d: ms for d, (ms, _) in best.items() if ms is not None}
    fastest = min(timed, key=timed.get) if timed else None
    if args.json:
        print(json.dumps({
            "pair": {"target": target, "draft": draft}, "fastest_dtype": fastest,
            "dtypes": {d: {"ms_per_token": ms, "best": what, "sweep": by_dtype[d][1]}
                       for d, (ms, what) in best.items()},
        }))  # fmt: skip
        return
    for dtype, (ms, what) in best.items():
        print(f"dtype {dtype}: {_f(ms, '{:.1f}')} ms/token at best ({plain(what)})")
    print(f"fastest dtype here: {fastest or 'n/a'}")


def _pair_drafter(args, drafters):
    """The drafter that decides which models load: a model drafter (needs a draft model)
    if the list has one, else the first."""
    model = [d for d in drafters if d.needs_draft_model]
    if model and len(drafters) > 1 and args.target and not args.draft:
        others = ",".join(d.kind for d in drafters if not d.needs_draft_model)
        raise UsageError(
            "--drafter model needs a draft model: give --draft (or --pair), or sweep "
            f"--drafter {others} alone"
        )
    return model[0] if model else drafters[0]


def traces_folder(path: str | None):
    """--traces: the folder (made if missing); UsageError if it cannot be one."""
    if path is None:
        return None
    import tempfile
    from pathlib import Path

    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):  # can a trace be written there at all?
            pass
    except OSError as e:
        raise UsageError(f"--traces: cannot write to {path} ({e.strerror or e})") from None
    return folder


def sweep(pair, prompts, config, progress, trace_dir=None):
    """Run the sweep; the first Ctrl-C stops it after the round in progress (a second one
    stops at once); what finished is still reported."""
    from specviz.core.tune.sweep import SweepResult, run_sweep

    runs = []

    def on_run(done, total, run):
        runs.append(run)
        progress(
            f"run {done}/{total}: prompt {run.prompt_index + 1} ({run.category}), "
            f"{run.drafter}/{run.policy}/{run.verifier} K={run.k}"
        )

    def stopped():
        total = len(prompts) * len(config.ks) * len(config.combos())
        return SweepResult(runs=runs, total=total, cancelled=True)

    return interruptible(
        lambda cancel: run_sweep(pair, prompts, config, cancel, on_run, trace_dir),
        progress,
        stopped,
    )


def _export(args, result, drafters, policies, draft) -> dict | None:
    """The best configuration in --export's engine form, or None."""
    from specviz.cli.tune.export_config import Best, export
    from specviz.core.tune.table import tables_by_category

    if not args.export or not result.runs:
        return None
    table = tables_by_category(result.runs)["overall"]
    if table.best is None:
        return {"engine": args.export, "command": None, "notes": ["no K could be measured"]}
    d_kind, p_kind, verifier, k = table.best
    drafter = next(d for d in drafters if d.kind == d_kind)
    policy = next(p for p in policies if p.kind == p_kind)
    best = Best(d_kind, drafter.values(), p_kind, policy.threshold, k, verifier,
                draft if drafter.needs_draft_model else None)  # fmt: skip
    command, notes = export(args.export, best)
    return {"engine": args.export, "command": command, "notes": notes}


def print_result(args, result, target: str, draft: str, sink: list | None = None) -> None:
    """The sweep's tables, costs, advice and greedy check on stdout; with `--json`, one
    object, printed or appended to `sink`."""
    from specviz.core.tune.table import tables_by_category

    tables = tables_by_category(result.runs) if result.runs else {}
    mismatches = _greedy_mismatches(result.runs)
    if args.json:
        obj = _result_json(args, result, tables, mismatches, target, draft)
        print(json.dumps(obj)) if sink is None else sink.append(obj)
        return
    if result.cancelled:
        print(f"cancelled: {len(result.runs)} of {result.total} runs finished")
    if "overall" not in tables:
        print("no run finished: nothing to report")
        return
    _print_tables(args, result, tables)
    if args.check_greedy:
        _print_greedy_check(mismatches)


def _greedy_mismatches(runs) -> list[dict]:
    """Each run whose text left the target's own greedy decoding: where, and the run."""
    return [
        {
            "prompt": r.prompt_index,
            "drafter": r.drafter,
            "policy": r.policy,
            "verifier": r.verifier,
            "k": r.k,
            **vars(r.greedy_diff),
        }
        for r in runs
        if r.greedy_diff is not None
    ]


def _result_json(args, result, tables: dict, mismatches: list[dict], target, draft) -> dict:
    """`tune --json`'s object."""
    from specviz.core.tune.table import prompt_rows, shape_advice

    obj = {
        "pair": {"target": target, "draft": draft},
        "drafter": args.drafter,
        "policy": args.policy,
        "prompts": args.prompts or "shipped",
        "runs": [],
        "best_k": None,
        "cancelled": result.cancelled,
        "completed": len(result.runs),
        "planned": result.total,
    }
    overall = tables.get("overall")
    if overall is not None:
        obj.update(_table_json(overall), costs=_costs_json(overall.costs))
        obj["shape_advice"] = shape_advice(overall)
        obj["categories"] = {n: _table_json(t) for n, t in tables.items() if n != "overall"}
        obj["prompt_runs"] = [r.to_json() for r in prompt_rows(result.runs, overall.costs)]
    if args.check_greedy:
        obj["greedy_mismatches"] = mismatches
    if getattr(args, "exported", None):
        obj["export"] = args.exported
    return obj


def _print_tables(args, result, tables: dict) -> None:
    """The per-category and overall tables, the costs, the advice and the export, as text."""
    from specviz.core.tune.table import shape_advice

    overall = tables["overall"]
    for name, table in tables.items():
        if name != "overall":
            print(format_table(name, table))
    print(format_table("overall", overall))
    print(format_costs(overall.costs))
    print(format_advisor(overall.curve, overall.advisor_best_k))
    for line in shape_advice(overall):  # chains and trees swept: why the fastest is
        print(f"shape: {plain(line)}")
    if args.traces:
        print(f"traces: {sum(r.trace_path is not None for r in result.runs)} written to "
              f"{plain(args.traces)}")  # fmt: skip
    print(
        "measured = T_t(1) x tokens / rounds' time; refined = E T_t(1) / (K T_d(1) + T_t(K+1) + o)"
        ", E = 1 + sum_i prod_{j<=i} a_j; Leviathan = (1 - a^(K+1)) / ((1 - a)(K c + 1))"
    )
    exported = getattr(args, "exported", None)
    if exported:
        print(f"\nfor {exported['engine']}: {plain(exported['command'] or 'n/a')}")
        for note in exported["notes"]:
            print(f"  note: {plain(note)}")


def _print_greedy_check(mismatches: list[dict]) -> None:
    """`--check-greedy`: every run equal to the target's greedy decoding, or where each
    differs."""
    if not mismatches:
        print("greedy check: every run equals the target's own greedy decoding")
    for m in mismatches:
        print(
            f"greedy check: prompt {m['prompt'] + 1} "
            f"{m['drafter']}/{m['policy']}/{m['verifier']} "
            f"K={m['k']} differs at token "
            f"{m['position']}: ours {json.dumps(m['text_ours'])} (logit "
            f"{m['logit_ours']:.4f}), target {json.dumps(m['text_theirs'])} "
            f"(logit {m['logit_theirs']:.4f})"
        )
