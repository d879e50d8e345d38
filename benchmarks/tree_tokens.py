"""Tokens per target pass of a token tree against a chain of the same depth, on the same
contexts and seeds, interleaved (core.tree.reference: width 1 is the chain), and what
one target pass over the tree's nodes costs against the chain's (median of interleaved
timings of core.tree.attention.score_tree on the same context). The drafting is left out
(the tree's draft here makes a fresh forward per node). Not a test: never part of the run.

    python benchmarks/tree_tokens.py --pair tiny --depth 4 --width 2 --rounds 200
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from specviz.core.decoding.warp import SamplingConfig  # noqa: E402
from specviz.core.engine.threads import set_threads  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402
from specviz.core.resources import example_prompts  # noqa: E402
from specviz.core.tree.reference import tree_round  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="tiny")
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--width", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    set_threads(None)
    name = f"builtin:{args.pair}"
    pair = load_pair(name, name)
    config = SamplingConfig(temperature=args.temperature)
    prompts = [pair.tokenizer(p)["input_ids"] for p in example_prompts()]
    shapes = {"chain": (1, "sample"), "tree-sample": (args.width, "sample"),
              "tree-topk": (args.width, "topk")}  # fmt: skip
    emitted = {name: [] for name in shapes}
    for i in range(args.rounds):
        context = prompts[i % len(prompts)]
        for shape, (width, draw) in shapes.items():  # interleaved, the same seed each
            gen = torch.Generator().manual_seed(i)
            rnd = tree_round(pair, context, width, args.depth, config, draw, gen)
            emitted[shape].append(len(rnd.emitted))
    pass_ms = _pass_ms(pair, prompts[0], args.width, args.depth)
    rng = np.random.default_rng(0)
    rows = {}
    chain = np.array(emitted["chain"], dtype=float)
    for shape, values in emitted.items():
        v = np.array(values, dtype=float)
        boot = [v[j].mean() / chain[j].mean() for j in (rng.integers(0, len(v), len(v))
                                                        for _ in range(2000))]  # fmt: skip
        rows[shape] = {"tokens_per_pass": v.mean(), "over_chain": v.mean() / chain.mean(),
                       "ci": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
                       "nodes": args.depth if shape == "chain" else
                       sum(args.width ** d for d in range(1, args.depth + 1))}  # fmt: skip
        rows[shape]["pass_ms"] = pass_ms["chain" if shape == "chain" else "tree"]
        rows[shape]["tokens_per_ms"] = rows[shape]["tokens_per_pass"] / rows[shape]["pass_ms"]
    if args.json:
        print(json.dumps({"pair": name, "depth": args.depth, "rows": rows}, indent=1))
        return 0
    print(f"{name}, depth {args.depth}, width {args.width}, T {args.temperature}, "
          f"{args.rounds} rounds, paired by context and seed")  # fmt: skip
    for shape, r in rows.items():
        print(f"  {shape:<12} {r['nodes']:3d} nodes  {r['tokens_per_pass']:.3f} tokens/pass  "
              f"x{r['over_chain']:.3f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]  "
              f"pass {r['pass_ms']:.2f} ms  {r['tokens_per_ms']:.3f} tokens/ms")  # fmt: skip
    return 0


def _pass_ms(pair, context: list[int], width: int, depth: int, repeats: int = 41) -> dict:
    """Median ms of one target pass over the full tree's nodes and over the chain's depth + 1
    tokens (its last token and drafts), interleaved, each after the same cached context."""
    import statistics
    import time

    from transformers import DynamicCache

    from specviz.core.decoding.forward import forward
    from specviz.core.decoding.kv_cache import crop_to
    from specviz.core.tree.attention import score_tree

    parents, frontier = [], [-1]
    for _ in range(depth):
        grown = []
        for node in frontier:
            for _ in range(width):
                parents.append(node)
                grown.append(len(parents) - 1)
        frontier = grown
    tree_tokens = [5 + i % 50 for i in range(len(parents))]
    chain = [5 + i for i in range(depth + 1)]
    vocab = pair.vocab_size
    times: dict[str, list[float]] = {"tree": [], "chain": []}
    with torch.inference_mode():
        cache = DynamicCache()
        forward(pair.target, context, cache, vocab, keep=1)
        past = cache.get_seq_length()
        for _ in range(repeats):
            start = time.perf_counter()
            score_tree(pair.target, tree_tokens, parents, cache, vocab)
            times["tree"].append(1000 * (time.perf_counter() - start))
            crop_to(cache, past)
            start = time.perf_counter()
            forward(pair.target, chain, cache, vocab, keep=len(chain))
            times["chain"].append(1000 * (time.perf_counter() - start))
            crop_to(cache, past)
    return {k: statistics.median(v[1:]) for k, v in times.items()}


if __name__ == "__main__":
    sys.exit(main())
