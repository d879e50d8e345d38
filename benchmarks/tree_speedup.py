"""Token trees against chains in the engine, wall clock: every shape (chains of K, trees of
width x budget x depth, drawn or top-W children, full or dynamic) and the target alone run
the same prompts with the same seeds, interleaved (the order shuffled per prompt and seed),
in one process. Reported per shape: tokens per target pass, tokens per second and the
speedup over the target alone; then the best tree against the best chain (each chosen on
the first seed's sessions), as the ratio of their tokens per second on the other seeds'
sessions, with a 95% bootstrap interval over those (prompt, seed) pairs. The
sessions' whole time is counted (drafting, the tree's masks and walk, the records without
top-N lists). Not a test: never part of the test run.

    python benchmarks/tree_speedup.py --pair tiny --repeats 3
    python benchmarks/tree_speedup.py --pair smollm2 --prompts 6 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from specviz.core.decoding.forward import decode  # noqa: E402
from specviz.core.decoding.warp import SamplingConfig  # noqa: E402
from specviz.core.engine.speculative import SpeculativeEngine  # noqa: E402
from specviz.core.engine.threads import set_threads  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402
from specviz.core.resources import example_prompts  # noqa: E402
from specviz.core.trace.records import Settings  # noqa: E402


def shapes(ks, widths, budgets, draws, kinds) -> dict[str, dict]:
    """{name: Settings fields}: a chain per K, a tree per (width, budget, K, draw, kind)."""
    out = {f"chain K{k}": {"k": k} for k in ks}
    for w in widths:
        for b in budgets:
            for k in ks:
                for draw in draws:
                    for kind in kinds:
                        name = f"tree {w}x{b} K{k} {draw}{' dyn' if kind == 'dynamic' else ''}"
                        out[name] = {"k": k, "tree_width": w, "tree_budget": b,
                                     "tree_draw": draw, "tree_shape": kind}  # fmt: skip
    return out


def session(pair, ids, fields, tokens, temperature, seed) -> tuple[int, int, float]:
    """(emitted, target passes, seconds) of one engine session, the prefill excluded."""
    settings = Settings(temperature=temperature, seed=seed, max_new_tokens=tokens,
                        ignore_eos=True, **fields)  # fmt: skip
    engine = SpeculativeEngine(pair, settings, trace=False)
    engine.prefill("", prompt_ids=ids, calibrate=False)
    start = time.perf_counter()
    rounds = list(engine.run())
    return sum(r.n_emitted for r in rounds), len(rounds), time.perf_counter() - start


def alone(pair, ids, tokens, temperature, seed) -> float:
    """Seconds of the target alone decoding `tokens` tokens (its own loop, one pass each)."""
    gen = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    decode(pair.target, ids, tokens, pair.vocab_size, SamplingConfig(temperature), gen)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="tiny")
    parser.add_argument("--k", default="2,3,4,5")
    parser.add_argument("--widths", default="2,3")
    parser.add_argument("--budgets", default="8,16")
    parser.add_argument("--draws", default="sample,topk")
    parser.add_argument("--kinds", default="full,dynamic")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2, help="seeds per prompt")
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ints = lambda text: [int(v) for v in text.split(",")]  # noqa: E731
    set_threads(None)
    name = f"builtin:{args.pair}"
    pair = load_pair(name, name)
    prompts = [pair.tokenizer(p)["input_ids"] for p in example_prompts()][: args.prompts]
    table = shapes(ints(args.k), ints(args.widths), ints(args.budgets),
                   args.draws.split(","), args.kinds.split(","))  # fmt: skip
    runs: dict[str, list] = {n: [] for n in [*table, "target alone"]}
    rng = random.Random(0)
    for seed in range(args.repeats):
        for ids in prompts:
            order = list(runs)
            rng.shuffle(order)
            for n in order:
                if n == "target alone":
                    runs[n].append(
                        (
                            args.tokens,
                            args.tokens,
                            alone(pair, ids, args.tokens, args.temperature, seed),
                        )
                    )
                else:
                    runs[n].append(session(pair, ids, table[n], args.tokens, args.temperature,
                                           seed))  # fmt: skip
    rate = {n: np.array([e / s for e, _, s in v]) for n, v in runs.items()}
    rows = {}
    for n, v in runs.items():
        emitted, passes = sum(e for e, _, _ in v), sum(p for _, p, _ in v)
        rows[n] = {"tokens_per_pass": emitted / passes, "tokens_per_s": float(rate[n].mean()),
                   "speedup": float((rate[n] / rate["target alone"]).mean())}  # fmt: skip
    # The best of each kind is chosen on the first seed's sessions and compared on the
    # others' (choosing and measuring on the same sessions would favour the luckiest shape).
    pick = len(prompts) if args.repeats > 1 else len(rate["target alone"])
    chains = [n for n in table if n.startswith("chain")]
    trees = [n for n in table if n.startswith("tree")]
    best_chain = max(chains, key=lambda n: rate[n][:pick].mean())
    best_tree = max(trees, key=lambda n: rate[n][:pick].mean())
    held = slice(pick, None) if args.repeats > 1 else slice(None)
    paired = rate[best_tree][held] / rate[best_chain][held]
    boot_rng = np.random.default_rng(0)
    boot = [paired[boot_rng.integers(0, len(paired), len(paired))].mean() for _ in range(4000)]
    result = {"pair": args.pair, "sessions_per_shape": len(paired), "rows": rows,
              "best_chain": best_chain, "best_tree": best_tree,
              "tree_over_chain": float(paired.mean()),
              "tree_over_chain_ci": [float(np.percentile(boot, 2.5)),
                                     float(np.percentile(boot, 97.5))]}  # fmt: skip
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{args.pair}: {len(paired)} sessions per shape of {args.tokens} tokens, "
          f"T {args.temperature}, interleaved")  # fmt: skip
    print(f"  {'shape':<28s} tok/pass   tok/s  speedup")
    for n, r in sorted(rows.items(), key=lambda kv: -kv[1]["tokens_per_s"]):
        print(f"  {n:<28s} {r['tokens_per_pass']:8.2f} {r['tokens_per_s']:7.1f} "
              f"{r['speedup']:7.2f}x")  # fmt: skip
    lo, hi = result["tree_over_chain_ci"]
    print(f"best tree {best_tree} / best chain {best_chain}: {result['tree_over_chain']:.3f}x "
          f"[{lo:.3f}, {hi:.3f}] (95%, paired by prompt and seed)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
