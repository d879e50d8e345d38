"""The engine served over loopback against the same engine in this process.

One pair, loaded here and in a `specviz serve` child process (127.0.0.1, the same torch
thread count), the same prompts, settings and seeds, interleaved after a warm-up
(a b c a b c ...):
  (a) local: SpeculativeEngine.prefill + run() in this process, tracing on (as the app)
  (b) remote_run: RemoteEngine.start + run(): the server streams rounds (`run --connect`)
  (c) remote_step: RemoteEngine.start + step() per round (what the window's worker does)
Tokens/s is generated tokens over wall time on the client, prefill included, per prompt;
figures are medians over prompts and repeats; the ratios are remote / local (goal >= 0.95).
Both sides make the same rounds (the seeds match), so the ratio is the cost of the wire.
Also printed: a step's wall time beyond its own draft + verify time, served and local
(medians): the wire, the server's loop and the client's parse, per round; and the round trip
of a request the server answers at once, back to back and after the client sat idle for
10 ms (as it does while a round computes): the part of the wire that is waking idle threads.
Not a test: never part of the test run.

    python benchmarks/remote_vs_local.py --pair tiny --k 4 --max-new-tokens 128 --repeats 5
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from specviz.core.engine.speculative import SpeculativeEngine  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402
from specviz.core.resources import example_prompts  # noqa: E402
from specviz.core.trace.records import Settings  # noqa: E402
from specviz.remote.client import RemoteEngine  # noqa: E402
from specviz.remote.spawn import ChildServer  # noqa: E402

METHODS = ("local", "remote_run", "remote_step")


def time_local(pair, remote, prompt, settings):
    engine = SpeculativeEngine(pair, settings)
    start = time.perf_counter()
    engine.prefill(prompt, calibrate=False)
    rounds = list(engine.run())
    return sum(r.n_emitted for r in rounds), time.perf_counter() - start


def time_remote_run(pair, remote, prompt, settings):
    start = time.perf_counter()
    remote.start(prompt, settings, calibrate=False)
    rounds = list(remote.run())
    return sum(r.n_emitted for r in rounds), time.perf_counter() - start


# Per round of a request per round: the client's wall time for step() less the round's own
# draft and verify time (the server's clock): what the wire, the server's loop and the parse
# cost; and the same for a local engine's step (its bookkeeping beyond the two passes).
BEYOND_MS: dict[str, list[float]] = {"local_step": [], "remote_step": []}


def _timed_steps(step, finished, key: str) -> list:
    rounds = []
    while not rounds or not finished():
        start = time.perf_counter()
        rnd = step()
        wall_ms = 1000 * (time.perf_counter() - start)
        BEYOND_MS[key].append(wall_ms - rnd.draft_ms - rnd.verify_ms)
        rounds.append(rnd)
    return rounds


def time_remote_step(pair, remote, prompt, settings):
    start = time.perf_counter()
    remote.start(prompt, settings, calibrate=False)
    rounds = _timed_steps(remote.step, lambda: remote.finished, "remote_step")
    return sum(r.n_emitted for r in rounds), time.perf_counter() - start


def local_step_overhead(pair, prompt, settings) -> None:
    """Not timed as a method: a local engine stepped round by round, for BEYOND_MS."""
    engine = SpeculativeEngine(pair, settings)
    engine.prefill(prompt, calibrate=False)
    _timed_steps(engine.step, lambda: engine.finished, "local_step")


TIMERS = {"local": time_local, "remote_run": time_remote_run, "remote_step": time_remote_step}


def round_trip_ms(remote, idle_s: float, n: int = 200) -> float:
    """Median wall time of a request the server answers at once (hello), sent back to back
    (idle_s 0) or after the client sat idle for idle_s, as it does while a round computes."""
    times = []
    for _ in range(n):
        time.sleep(idle_s)
        start = time.perf_counter()
        remote._request({"op": "hello"}, remote.reply_timeout)
        times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", default="tiny", help="a built-in pair (default tiny)")
    parser.add_argument("--target", help="instead of --pair: target model")
    parser.add_argument("--draft", help="instead of --pair: draft model")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--prompts", type=int, default=3, help="example prompts used")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads on each side")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    target = args.target or f"builtin:{args.pair}"
    draft = args.draft or f"builtin:{args.pair}"
    torch.set_num_threads(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # for the server child
    pair = load_pair(target, draft)
    server = ChildServer(target, draft)
    remote = RemoteEngine(server.address, server.token)
    prompts = example_prompts()[: args.prompts]
    base = Settings(k=args.k, temperature=args.temperature, max_new_tokens=args.max_new_tokens)
    rates: dict[str, list[float]] = {m: [] for m in METHODS}
    ratios: dict[str, list[float]] = {m: [] for m in METHODS[1:]}
    tokens: dict[str, list[int]] = {m: [] for m in METHODS}
    try:
        for seed, prompt in enumerate(prompts):  # warm-up, not counted
            for method in METHODS:
                TIMERS[method](pair, remote, prompt, dataclasses.replace(base, seed=seed))
        for values in BEYOND_MS.values():
            values.clear()
        for repeat in range(args.repeats):
            for seed, prompt in enumerate(prompts):
                settings = dataclasses.replace(base, seed=1000 * repeat + seed)
                here = {}
                for method in METHODS:
                    n, seconds = TIMERS[method](pair, remote, prompt, settings)
                    here[method] = n / seconds
                    rates[method].append(n / seconds)
                    tokens[method].append(n)
                for method in ratios:
                    ratios[method].append(here[method] / here["local"])
                local_step_overhead(pair, prompt, settings)
        rtt = {
            "back_to_back": round_trip_ms(remote, 0.0),
            "after_10ms_idle": round_trip_ms(remote, 0.01),
        }
    finally:
        remote.close()
        server.stop()
    assert tokens["local"] == tokens["remote_run"] == tokens["remote_step"], "runs differ"
    result = {
        "pair": {"target": target, "draft": draft},
        "settings": dataclasses.asdict(base),
        "threads": args.threads,
        "runs_per_method": len(rates["local"]),
        "tokens_per_s": {m: statistics.median(v) for m, v in rates.items()},
        "ratio_to_local": {m: statistics.median(v) for m, v in ratios.items()},
        "step_ms_beyond_draft_verify": {k: statistics.median(v) for k, v in BEYOND_MS.items()},
        "hello_round_trip_ms": rtt,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{target} + {draft}, K={args.k}, {result['runs_per_method']} runs per method")
        for method in METHODS:
            line = f"  {method:12s} {result['tokens_per_s'][method]:8.1f} tokens/s"
            if method in ratios:
                line += f"   ratio to local {result['ratio_to_local'][method]:.3f}"
            print(line)
        beyond = result["step_ms_beyond_draft_verify"]
        print(
            "  a step's wall time beyond its draft + verify time (median ms): local "
            f"{beyond['local_step']:.3f}, served {beyond['remote_step']:.3f}"
        )
        print(
            "  a request the server answers at once (median ms): back to back "
            f"{rtt['back_to_back']:.3f}, after 10 ms idle {rtt['after_10ms_idle']:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
