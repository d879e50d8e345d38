"""Drafters and policies against the target alone, on the same prompts, in one process.

For each pair (the built-in tiny pair; smollm2 too when its packages are installed), each
prompt set (free continuation: the shipped example prompts; copying: prompts that quote a
passage and ask for it again) and each configuration (target alone; the draft model with
a constant K, the heuristic and the threshold policies; prompt lookup; early exit at a few
layers), runs are interleaved (a b c ... a b c ...) after a warm-up. Reported as ratios to
the target alone: speedup (all tokens over all seconds against the target's, so a run that
ends early weighs less; the median of per-run ratios is kept too), tokens per target pass,
alpha (mean sum_x min(p, q) over judged positions), c (one draft step over one target step,
as the engine calibrates it). Not a test: never part of the test run.

    python benchmarks/drafters.py --json                       # every pair found
    python benchmarks/drafters.py --pair tiny --prompts 2 --repeats 1 --max-new-tokens 16
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from specviz.core.decoding.forward import decode, measure_ms_per_token  # noqa: E402
from specviz.core.decoding.k_policy import PolicyConfig  # noqa: E402
from specviz.core.decoding.warp import SamplingConfig  # noqa: E402
from specviz.core.drafters.registry import DrafterConfig  # noqa: E402
from specviz.core.engine.speculative import SpeculativeEngine  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402
from specviz.core.resources import example_prompts  # noqa: E402
from specviz.core.trace.records import Settings  # noqa: E402

# Prompts that quote a passage and ask for it again: what prompt lookup is for.
PASSAGES = [
    "In the beginning God created the heaven and the earth. And the earth was without "
    "form, and void; and darkness was upon the face of the deep.",
    "The Lord is my shepherd; I shall not want. He maketh me to lie down in green pastures: "
    "he leadeth me beside the still waters.",
    "A penny saved is a penny earned, and a fool and his money are soon parted, for the "
    "love of money is the root of all evil.",
    "Blessed are the meek: for they shall inherit the earth. Blessed are they which do "
    "hunger and thirst after righteousness: for they shall be filled.",
]
COPY_PROMPTS = [
    f"{text}\n\nThe same passage again, word for word:\n\n{text[:24]}" for text in PASSAGES
]


def configurations(n_layers: int, k: int, exit_layers: list[int], threshold: float):
    """(label, drafter, policy): None for the target alone."""
    out = [("target alone", None, None)]
    model = DrafterConfig("model")
    out += [
        (f"model K={k}", model, PolicyConfig("constant")),
        ("model heuristic", model, PolicyConfig("heuristic")),
        (f"model threshold {threshold}", model, PolicyConfig("threshold", threshold)),
        (f"lookup K={k}", DrafterConfig("lookup", ngram_max=3), PolicyConfig("constant")),
        ("lookup heuristic", DrafterConfig("lookup", ngram_max=3), PolicyConfig("heuristic")),
    ]
    for layer in (n for n in exit_layers if 1 <= n < n_layers):
        drafter = DrafterConfig("early-exit", exit_layer=layer)
        out.append((f"early-exit L={layer} K={k}", drafter, PolicyConfig("constant")))
    return out


def time_target(pair, ids, settings, seed):
    config = SamplingConfig(settings.temperature, settings.top_k, settings.top_p)
    gen = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    out = decode(
        pair.target, ids, settings.max_new_tokens, pair.vocab_size, config, gen, pair.eos_token_id
    )
    return len(out), time.perf_counter() - start, []


def time_engine(engine, ids, seed):
    engine.settings = dataclasses.replace(engine.settings, seed=seed)
    start = time.perf_counter()
    engine.prefill("", prompt_ids=ids, calibrate=False)
    rounds = list(engine.run())
    return engine.n_generated, time.perf_counter() - start, rounds


def bench(pair, name, prompt_set, prompts, settings, configs, repeats):
    ids_list = [pair.tokenizer(p)["input_ids"] for p in prompts]
    engines = {
        label: SpeculativeEngine(pair, settings, trace=False, drafter=d, policy=p)
        for label, d, p in configs
        if d is not None
    }

    def runner(label, ids, seed):
        if label not in engines:
            return time_target(pair, ids, settings, seed)
        return time_engine(engines[label], ids, seed)

    labels = [label for label, _, _ in configs]
    for label in labels:  # warm-up: allocator, kernels, lazy imports
        runner(label, ids_list[0], 0)
    rates = {label: [] for label in labels}
    totals = {label: [0, 0.0] for label in labels}  # tokens, seconds over every run
    rounds_of = {label: [] for label in labels}
    for rep in range(repeats):
        for i, ids in enumerate(ids_list):
            for label in labels:  # interleaved
                n, seconds, rounds = runner(label, ids, 1000 * rep + i)
                rates[label].append(n / seconds)
                totals[label][0] += n
                totals[label][1] += seconds
                rounds_of[label] += rounds

    def rate(label):  # all tokens over all time: a short run (an early end) weighs less
        return totals[label][0] / totals[label][1]

    base = rate("target alone")
    calib_ids = ids_list[0]
    target_ms = measure_ms_per_token(pair.target, calib_ids, 16, pair.vocab_size)
    rows = []
    for label in labels:
        rounds = rounds_of[label]
        judged = [t.alpha for r in rounds for t in r.tokens if t.status in ("accepted", "rejected")]
        emitted = sum(r.n_emitted for r in rounds)
        c = None
        if label in engines:
            c = engines[label].drafter.measure_ms(calib_ids, 16) / target_ms
        rows.append(
            {
                "config": label,
                "tokens_per_s": rate(label),
                "speedup": rate(label) / base,
                "speedup_median_run": statistics.median(rates[label])
                / statistics.median(rates["target alone"]),
                "tokens_per_target_pass": emitted / len(rounds) if rounds else 1.0,
                "alpha": statistics.fmean(judged) if judged else None,
                "acceptance": (
                    sum(r.n_accepted for r in rounds) / max(1, sum(r.n_judged for r in rounds))
                    if rounds
                    else None
                ),
                "mean_k": statistics.fmean(r.k for r in rounds) if rounds else None,
                "c": c,
            }
        )
    return {
        "pair": name,
        "prompt_set": prompt_set,
        "prompts": len(prompts),
        "repeats": repeats,
        "k": settings.k,
        "temperature": settings.temperature,
        "max_new_tokens": settings.max_new_tokens,
        "target_ms_per_token": target_ms,
        "rows": rows,
    }


def default_pairs() -> list[str]:
    pairs = ["tiny"]
    try:
        from specviz.core.models.smollm2 import missing_packages

        if not missing_packages():
            pairs.append("smollm2")
    except ImportError:
        pass
    return pairs


def n_layers_of(model) -> int:
    from specviz.core.drafters.early_exit import decoder_layers

    base, attr = decoder_layers(model)
    return len(getattr(base, attr))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", action="append", help="built-in pair (repeatable)")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.0, help="default 0 (greedy)")
    parser.add_argument("--threshold", type=float, default=0.4)
    parser.add_argument("--exit-layers", default="2,4,8,12", help="comma-separated L values")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=4, help="prompts per set")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--sets", default="free,copy", help="prompt sets: free, copy")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    sets = {"free": example_prompts(), "copy": COPY_PROMPTS}
    exit_layers = [int(x) for x in args.exit_layers.split(",") if x.strip()]
    settings = Settings(k=args.k, temperature=args.temperature, max_new_tokens=args.max_new_tokens)
    runs = []
    for name in args.pair or default_pairs():
        pair = load_pair(f"builtin:{name}", f"builtin:{name}")
        configs = configurations(n_layers_of(pair.target), args.k, exit_layers, args.threshold)
        for prompt_set in args.sets.split(","):
            prompts = sets[prompt_set][: args.prompts]
            result = bench(pair, name, prompt_set, prompts, settings, configs, args.repeats)
            runs.append(result)
            if not args.json:
                print_run(result)
    if args.json:
        print(json.dumps({"threads": torch.get_num_threads(), "runs": runs}, indent=1))
    return 0


def print_run(r: dict) -> None:
    def f(value, fmt):
        return "   n/a" if value is None else fmt.format(value)

    print(
        f"\n{r['pair']}  {r['prompt_set']} prompts ({r['prompts']} x {r['repeats']})  "
        f"K={r['k']}  temperature={r['temperature']}  {r['max_new_tokens']} new tokens  "
        f"target {r['target_ms_per_token']:.1f} ms/token"
    )
    print(f"  {'':26s} speedup  tokens/pass  alpha  accept  mean K      c")
    for row in r["rows"]:
        print(
            f"  {row['config']:26s} {row['speedup']:6.2f}x  {row['tokens_per_target_pass']:10.2f}"
            f"  {f(row['alpha'], '{:5.2f}')}  {f(row['acceptance'], '{:6.2f}')}"
            f"  {f(row['mean_k'], '{:6.2f}')}  {f(row['c'], '{:5.3f}')}"
        )


if __name__ == "__main__":
    sys.exit(main())
