"""How far to trust `specviz tune`: the cost model's predictions against measurement.

In one process, interleaved (each prompt runs every K in a shuffled order; with --load each
run is done twice in a row, quiet then with one busy background process on the same cores):

- per K: the measured speedup (T_t(1) x tokens / rounds' time), the refined prediction
  (E T_t(1) / (K T_d(1) + T_t(K+1) + o), figures pooled over the sweep), measured / refined,
  and Leviathan's formula with measured / Leviathan (the "before" of issue 12);
- the true speedup: target-only decoding wall time per token (decoding.forward, the same prompts,
  interleaved) over the speculative rounds' time per token; measured / true checks the
  T_t(1) baseline itself;
- the advisor: best K from the refined curve of the pooled sweep and of one K's runs alone
  (--advisor-k), against the best measured K (speedup at the advisor's K / best measured);
- under load: per K, loaded measured / quiet measured, for the sweep's pooled figure and for
  the window figure of single sessions (what the window shows), median over runs.

Not a test: never part of the test run. Tiny check:
    python benchmarks/tune_accuracy.py --limit 2 --k 1-3 --max-new-tokens 16
Full (coordinator, quiet machine):
    python benchmarks/tune_accuracy.py --k 1-8 --load --json > tune_accuracy.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from specviz.cli.tune.tune import parse_ks  # noqa: E402
from specviz.core.decoding.forward import decode  # noqa: E402
from specviz.core.decoding.warp import SamplingConfig  # noqa: E402
from specviz.core.metrics import costmodel  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402
from specviz.core.trace.records import Settings  # noqa: E402
from specviz.core.tune.promptsets import load_prompt_set  # noqa: E402
from specviz.core.tune.sweep import SweepConfig, SweepRun, run_one
from specviz.core.tune.table import sweep_table  # noqa: E402


def busy(flag, stop) -> None:
    """A background process: spins while `flag` is set, until `stop`."""
    x = 0
    while not stop.is_set():
        if flag.is_set():
            for _ in range(100_000):
                x += 1
        else:
            time.sleep(0.001)


def target_only_ms_per_token(pair, text: str, config: SweepConfig) -> float:
    ids = pair.tokenizer(text)["input_ids"]
    s = config.settings
    sampling = SamplingConfig(s.temperature, s.top_k, s.top_p)
    gen = torch.Generator().manual_seed(s.seed)
    start = time.perf_counter()
    out = decode(
        pair.target, ids, s.max_new_tokens, pair.vocab_size, sampling, gen, pair.eos_token_id
    )
    total = time.perf_counter() - start
    # decode() includes the prompt's prefill (and the first token from it): time that alone.
    start = time.perf_counter()
    decode(pair.target, ids, 1, pair.vocab_size, sampling, gen, pair.eos_token_id)
    prefill = time.perf_counter() - start
    return 1000 * max(total - prefill, 1e-9) / max(len(out) - 1, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", default="tiny")
    parser.add_argument("--prompts", help="prompt set (default: the shipped one)")
    parser.add_argument("--limit", type=int, help="first N prompts only")
    parser.add_argument("--k", default="1-8")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--advisor-k", type=int, default=4, help="K whose runs alone advise")
    parser.add_argument("--load", action="store_true", help="also run with one busy process")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ks = parse_ks(args.k)
    prompts = load_prompt_set(args.prompts)[: args.limit]
    name = f"builtin:{args.pair}" if ":" not in args.pair and "/" not in args.pair else args.pair
    pair = load_pair(name, name)
    settings = Settings(max_new_tokens=args.max_new_tokens, temperature=args.temperature)
    config = SweepConfig(ks=ks, settings=settings)
    conditions = ("quiet", "load") if args.load else ("quiet",)
    if args.load:
        flag, stop = multiprocessing.Event(), multiprocessing.Event()
        proc = multiprocessing.Process(target=busy, args=(flag, stop), daemon=True)
        proc.start()
    runs: dict[str, list[SweepRun]] = {c: [] for c in conditions}
    window: dict[str, dict[int, list[float]]] = {c: {k: [] for k in ks} for c in conditions}
    true_ms: list[float] = []
    rng = random.Random(0)
    run_one(pair, prompts[0].text, ks[0], config)  # warm-up
    started = time.perf_counter()
    try:
        for i, prompt in enumerate(prompts):
            order = list(ks)
            rng.shuffle(order)
            true_ms.append(target_only_ms_per_token(pair, prompt.text, config))
            for k in order:
                for cond in conditions:
                    if args.load:
                        (flag.set if cond == "load" else flag.clear)()
                    full = k == order[0] and cond == conditions[0]  # once per prompt
                    rounds = run_one(pair, prompt.text, k, config, full_probe=full)
                    runs[cond].append(SweepRun(i, prompt.category, k, rounds))
                    fig = costmodel.figures(rounds)
                    if fig.speedup_measured is not None and not fig.impossible:
                        window[cond][k].append(fig.speedup_measured)
                if args.load:
                    flag.clear()
            print(f"prompt {i + 1}/{len(prompts)} done", file=sys.stderr, flush=True)
    finally:
        if args.load:
            stop.set()
            proc.join(5)
    elapsed = time.perf_counter() - started

    quiet = sweep_table(runs["quiet"])
    advisor_runs = [r for r in runs["quiet"] if r.k == args.advisor_k]
    one_k = sweep_table(advisor_runs) if advisor_runs else None
    t_true = statistics.median(true_ms)
    rows = []
    for row in quiet.rows:
        rounds = [r for run in runs["quiet"] if run.k == row.k for r in run.rounds]
        ms = sum(costmodel.capped_ms([(r.n_drafted, r.ms) for r in rounds]))
        true_speedup = t_true * sum(r.n_emitted for r in rounds) / ms if ms else None
        out = {
            **row.to_json(),
            "speedup_true": true_speedup,
            "measured_over_true": (
                row.speedup_measured / true_speedup
                if true_speedup and row.speedup_measured
                else None
            ),
            "measured_over_leviathan": (
                row.speedup_measured / row.speedup_leviathan
                if row.speedup_leviathan and row.speedup_measured
                else None
            ),
        }
        if args.load:
            loaded = {r.k: r for r in sweep_table(runs["load"]).rows}.get(row.k)
            lw, qw = window["load"][row.k], window["quiet"][row.k]
            out["load_over_quiet"] = (
                loaded.speedup_measured / row.speedup_measured
                if loaded and loaded.speedup_measured and row.speedup_measured
                else None
            )
            out["window_load_over_quiet"] = (
                statistics.median(lw) / statistics.median(qw) if lw and qw else None
            )
        rows.append(out)
    best_measured = {r.k: r.speedup_measured for r in quiet.rows}
    best = quiet.best_k

    def at(k):
        return best_measured.get(k) if k is not None else None

    def in_range(table):
        """The advisor's best K among the swept K (the measured ones to compare with)."""
        points = [(k, v) for k, v in table.curve if k in best_measured] if table else []
        return max(points, key=lambda kv: kv[1])[0] if points else None

    pooled_k, one_k_k = in_range(quiet), in_range(one_k)

    result = {
        "pair": name,
        "prompts": len(prompts),
        "ks": list(ks),
        "max_new_tokens": args.max_new_tokens,
        "elapsed_s": elapsed,
        "target_only_ms_per_token": t_true,
        "rows": rows,
        "best_measured_k": best,
        "advisor_best_k_1_16": quiet.advisor_best_k,
        "advisor_best_k_pooled": pooled_k,
        f"advisor_best_k_from_k{args.advisor_k}": one_k_k,
        "advisor_pooled_over_best": at(pooled_k) / at(best) if at(pooled_k) and at(best) else None,
        "advisor_one_k_over_best": at(one_k_k) / at(best) if at(one_k_k) and at(best) else None,
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return 0

    def f(value, fmt="{:.2f}"):
        return "  n/a" if value is None else fmt.format(value)

    print(f"{name}, {len(prompts)} prompts, K {args.k}, {elapsed:.0f} s")
    header = "  K  alpha  meas   refined meas/ref  Leviathan meas/Lev  true  meas/true"
    print(header + ("  load/quiet window" if args.load else ""))
    for r in rows:
        line = (
            f" {r['k']:2d}  {f(r['alpha'], '{:.3f}')} {f(r['speedup_measured'])}"
            f"  {f(r['speedup_refined'])}   {f(r['measured_over_refined'])}"
            f"    {f(r['speedup_leviathan'])}     {f(r['measured_over_leviathan'])}"
            f"  {f(r['speedup_true'])}  {f(r['measured_over_true'])}"
        )
        if args.load:
            line += f"     {f(r['load_over_quiet'])}    {f(r['window_load_over_quiet'])}"
        print(line)
    print(
        f"best measured K {best}; advisor (pooled, within the swept K) {pooled_k}, "
        f"ratio {f(result['advisor_pooled_over_best'])}; advisor from K={args.advisor_k} "
        f"alone {result[f'advisor_best_k_from_k{args.advisor_k}']}, "
        f"ratio {f(result['advisor_one_k_over_best'])}; advisor over K = 1..16: "
        f"{quiet.advisor_best_k} (ratio: measured speedup at that K / best measured)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
