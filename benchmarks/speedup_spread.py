"""Is the measured speedup a measurement? Identical sessions against an interleaved A/B.

In one process, after a warm-up, for each repeat in turn:
  (s) one `specviz run`-like session (the engine with its cost probes; the summary's
      measured speedup, its 95% interval and its T_t(1)), always the same settings and seed;
  (a) target-only decoding of the same number of tokens (core.decoding.forward.decode);
  (b) the same speculative session without probes (nothing but the rounds).
The A/B speedup of a repeat is (a)'s ms per token over (b)'s, both wall time, prefill
excluded; the figure to hit is their median. Reported: the sessions' spread (max / min), the
median's distance from the A/B, and how many of the sessions' intervals hold the A/B.
--busy N starts N processes that spin a core each for the whole run (a busy machine).
Not a test: never part of the test run.

    python benchmarks/speedup_spread.py --pair tiny --sessions 6 --tokens 128 --json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from specviz.core.decoding.forward import decode  # noqa: E402
from specviz.core.decoding.warp import SamplingConfig  # noqa: E402
from specviz.core.engine.speculative import SpeculativeEngine  # noqa: E402
from specviz.core.engine.threads import set_threads  # noqa: E402
from specviz.core.metrics.running import summary  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402
from specviz.core.resources import example_prompts  # noqa: E402
from specviz.core.trace.records import Settings  # noqa: E402
from specviz.core.trace.session import Session  # noqa: E402


def _spin(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def session(pair, prompt, settings):
    engine = SpeculativeEngine(pair, settings, trace=False)
    engine.prefill(prompt)
    rounds = list(engine.run())
    return summary(Session(engine.header, rounds))


def target_only_ms(pair, ids, settings, n):
    gen = torch.Generator().manual_seed(settings.seed)
    config = SamplingConfig(settings.temperature, settings.top_k, settings.top_p)
    start = time.perf_counter()
    out = decode(pair.target, ids, n, pair.vocab_size, config, gen, None)
    return 1000 * (time.perf_counter() - start) / len(out)


def speculative_ms(pair, ids, settings):
    engine = SpeculativeEngine(pair, settings, trace=False)
    engine.prefill("", prompt_ids=ids, calibrate=False)
    start = time.perf_counter()
    rounds = list(engine.run())
    ms = 1000 * (time.perf_counter() - start)
    return ms / sum(r.n_emitted for r in rounds), sum(r.n_emitted for r in rounds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="tiny")
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: the engines' own)"
    )
    parser.add_argument("--busy", type=int, default=0, help="processes spinning a core each")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    set_threads(args.threads)  # as `specviz run` does: one per core but one by default
    name = f"builtin:{args.pair}"
    pair = load_pair(name, name)
    settings = Settings(
        k=args.k, temperature=args.temperature, seed=args.seed, max_new_tokens=args.tokens
    )
    prompt = example_prompts()[0]
    ids = pair.tokenizer(prompt)["input_ids"]
    stop = multiprocessing.Event()
    busy = [multiprocessing.Process(target=_spin, args=(stop,)) for _ in range(args.busy)]
    for p in busy:
        p.start()
    try:
        session(pair, prompt, dataclasses.replace(settings, max_new_tokens=16))  # warm-up
        rows = []
        for _ in range(args.sessions):
            s = session(pair, prompt, settings)
            spec_ms, n = speculative_ms(pair, ids, settings)
            base_ms = target_only_ms(pair, ids, settings, n)
            rows.append(
                {
                    "measured": s["speedup_measured"],
                    "ci": s.get("speedup_ci"),
                    "status": s.get("speedup_status"),
                    "baseline_ms": s["baseline_ms_per_token"],
                    "ab": base_ms / spec_ms,
                    "ab_target_ms": base_ms,
                }
            )
    finally:
        stop.set()
        for p in busy:
            p.join()
    measured = [r["measured"] for r in rows if r["measured"] is not None]
    ab = statistics.median(r["ab"] for r in rows)
    inside = sum(1 for r in rows if r["ci"] and r["ci"][0] <= ab <= r["ci"][1])
    result = {
        "pair": args.pair,
        "k": args.k,
        "tokens": args.tokens,
        "threads": torch.get_num_threads(),
        "busy": args.busy,
        "sessions": rows,
        "spread": max(measured) / min(measured) if measured else None,
        "median_measured": statistics.median(measured) if measured else None,
        "ab_median": ab,
        "median_over_ab": statistics.median(measured) / ab if measured else None,
        "ab_inside_interval": inside,
    }
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for r in rows:
            ci = "n/a" if not r["ci"] else f"[{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]"
            shown = "n/a" if r["measured"] is None else f"{r['measured']:.2f}x"
            print(
                f"measured {shown} {ci} ({r['status']}) baseline "
                f"{r['baseline_ms']:.2f} ms  | A/B {r['ab']:.2f}x ({r['ab_target_ms']:.2f} ms)"
            )
        print(
            f"spread {result['spread']:.2f}  median {result['median_measured']:.2f}  "
            f"A/B {ab:.2f}  median/AB {result['median_over_ab']:.2f}  A/B inside {inside}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
