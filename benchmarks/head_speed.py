"""EAGLE-3 heads end to end: engine sessions (chains of K, greedy) with the shipped head and
with other heads (e.g. benchmarks/head_vocab.py's pruned ones) against the target alone, on
the same chat questions, interleaved per question (the order shuffled), in one process.
Reported per head: tokens per target pass, tokens/s over the target alone's, whether each
text equals the target alone's, and its tokens/s over the shipped head's with a 95% bootstrap
interval over the (question, repeat) sessions, paired. The prefill is left out of every
timing; times are this thread's CPU time by default (one torch thread: time the core was
given to other processes is not counted), --clock wall for elapsed time. Not a test.

    python benchmarks/head_speed.py --head /tmp/pruned/vocab-8192 --questions 6 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from transformers import DynamicCache  # noqa: E402

from benchmarks import head_step  # noqa: E402  (its clock and its --clock)
from specviz.core.bench.questions import load_questions  # noqa: E402
from specviz.core.decoding.forward import forward, step  # noqa: E402
from specviz.core.decoding.warp import SamplingConfig  # noqa: E402
from specviz.core.drafters.registry import DrafterConfig  # noqa: E402
from specviz.core.engine.speculative import SpeculativeEngine  # noqa: E402
from specviz.core.models.builtin import resources_dir  # noqa: E402
from specviz.core.models.chat import render, template_of  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402
from specviz.core.trace.records import Settings  # noqa: E402

GREEDY = SamplingConfig(temperature=0)


def alone(pair, ids: list[int], tokens: int) -> tuple[list[int], float]:
    """The target alone's greedy tokens and seconds, its prefill untimed."""
    cache = DynamicCache()
    with torch.inference_mode():
        token = int(forward(pair.target, ids, cache, pair.vocab_size, keep=1)[0].argmax())
        out = [token]
        start = head_step.clock()
        while len(out) < tokens:
            token = step(pair.target, token, cache, pair.vocab_size, GREEDY, None)
            out.append(token)
        return out, head_step.clock() - start


def session(pair, ids: list[int], tokens: int, k: int, drafter: DrafterConfig):
    """(tokens, target passes, seconds) of one greedy engine session, prefill untimed."""
    settings = Settings(k=k, temperature=0, max_new_tokens=tokens, ignore_eos=True)
    engine = SpeculativeEngine(pair, settings, trace=False, drafter=drafter)
    engine.prefill("", prompt_ids=ids, calibrate=False)
    start = head_step.clock()
    rounds = list(engine.run())
    seconds = head_step.clock() - start
    emitted = [t.id for r in rounds for t in r.tokens if t.emitted]
    return emitted, len(rounds), seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="smollm2")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--head", action="append", default=[], metavar="DIR")
    parser.add_argument("--questions", type=int, default=6, help="of resources/prompts/chat.jsonl")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--k", type=int, default=4)
    head_step.add_clock_arguments(parser)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    head_step.choose_clock(parser, args)
    name = f"builtin:{args.pair}"
    pair = load_pair(name, None, dtype=args.dtype)
    questions = load_questions(resources_dir() / "prompts" / "chat.jsonl")[: args.questions]
    chat = template_of(pair.tokenizer) is not None  # tiny has none: its questions as text
    texts = [render(pair.tokenizer, q.turns[0]) if chat else q.turns[0] for q in questions]
    prompts = [pair.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    heads = {"shipped": None, **{h: h for h in args.head}}
    runs = {n: [] for n in ["target alone", *heads]}  # (tokens, passes, seconds, same text)
    rng = random.Random(0)
    for _ in range(args.repeats):
        for ids in prompts:
            order = list(runs)
            rng.shuffle(order)
            texts = {}
            for n in order:
                if n == "target alone":
                    out, seconds = alone(pair, ids, args.tokens)
                    texts[n] = out
                    runs[n].append([len(out), len(out), seconds, True])
                else:
                    drafter = DrafterConfig("eagle3", head=heads[n])
                    out, passes, seconds = session(pair, ids, args.tokens, args.k, drafter)
                    texts[n] = out
                    runs[n].append([len(out), passes, seconds, None])
            for n in heads:
                runs[n][-1][3] = texts[n] == texts["target alone"]
    arr = {n: np.array([r[:3] for r in v], dtype=float) for n, v in runs.items()}
    base = arr["target alone"]
    rng_np = np.random.default_rng(0)
    rows = []
    for n in heads:
        a, s = arr[n], arr["shipped"]
        speed = lambda x, i: x[i, 0].sum() / x[i, 2].sum()  # noqa: E731
        every = np.arange(len(a))
        boot = [speed(a, i) / speed(s, i) for i in
                (rng_np.integers(0, len(a), len(a)) for _ in range(2000))]  # fmt: skip
        rows.append({
            "head": n, "mat": a[:, 0].sum() / a[:, 1].sum(),
            "speedup": speed(a, every) / speed(base, every),
            "over_shipped": speed(a, every) / speed(s, every),
            "over_shipped_ci": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
            "same_text": f"{sum(bool(r[3]) for r in runs[n])}/{len(runs[n])}",
        })  # fmt: skip
    if args.json:
        print(json.dumps({"pair": name, "dtype": args.dtype, "k": args.k, "clock": args.clock,
                          "rows": rows}, indent=1))  # fmt: skip
        return 0
    print(f"{name} {args.dtype}, K {args.k}, greedy, {len(prompts)} questions x {args.repeats}, "
          f"{args.tokens} tokens, {args.clock} clock; target alone "
          f"{speed(base, np.arange(len(base))):.1f} tokens/s")  # fmt: skip
    for r in rows:
        lo, hi = r["over_shipped_ci"]
        print(f"  {r['head']}: #MAT {r['mat']:.3f}, {r['speedup']:.3f}x the target alone, "
              f"{r['over_shipped']:.3f}x the shipped head [{lo:.3f}, {hi:.3f}], same text "
              f"{r['same_text']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
