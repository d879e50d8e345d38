"""Engine sessions with the target's few-row products packed (core.models.packed_linear, as
the loader leaves a float32 CPU target) against the same sessions with them plain, in one
process: per drafter, tokens per target pass, tokens/s over the target alone's and over the
same drafter's with plain products (a 95% bootstrap interval over the (question, repeat)
sessions, paired), and whether each text equals the target alone's. Every session of a
question runs back to back in a shuffled order; the packing is switched by the layers' class
(no repacking); prefills are left out; CPU clock of the one torch thread by default. Not a
test.

    python benchmarks/packed_speed.py --questions 18 --repeats 1
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks import head_step  # noqa: E402  (its clock and its --clock)
from benchmarks.head_speed import alone, session  # noqa: E402
from specviz.core.bench.questions import load_questions  # noqa: E402
from specviz.core.drafters.registry import DrafterConfig  # noqa: E402
from specviz.core.models.builtin import resources_dir  # noqa: E402
from specviz.core.models.chat import render, template_of  # noqa: E402
from specviz.core.models.dtype_probe import machine  # noqa: E402
from specviz.core.models.packed_linear import packed_bytes, switch  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="smollm2")
    parser.add_argument("--configs", default="eagle3:4,eagle3:2,lookup:3", help="drafter:K,...")
    parser.add_argument("--questions", type=int, default=6, help="of resources/prompts/chat.jsonl")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=64)
    head_step.add_clock_arguments(parser)
    args = parser.parse_args()
    head_step.choose_clock(parser, args)
    name = f"builtin:{args.pair}"
    pair = load_pair(name, None, dtype="float32")
    if not packed_bytes(pair.target):
        parser.error("the loader packed nothing here (oneDNN absent, memory, or switched off)")
    questions = load_questions(resources_dir() / "prompts" / "chat.jsonl")[: args.questions]
    chat = template_of(pair.tokenizer) is not None
    texts = [render(pair.tokenizer, q.turns[0]) if chat else q.turns[0] for q in questions]
    prompts = [pair.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    configs = args.configs.split(",")
    cells = ["alone", *((c, packed) for c in configs for packed in (True, False))]
    runs = {c: [] for c in cells}  # [tokens, passes, seconds, same text as the target alone]
    rng = random.Random(0)
    for _ in range(args.repeats):
        for ids in prompts:
            switch(pair.target, False)
            reference, seconds = alone(pair, ids, args.tokens)
            runs["alone"].append([len(reference), len(reference), seconds, True])
            order = cells[1:]
            rng.shuffle(order)
            for cell in order:
                switch(pair.target, cell[1])
                name, k = cell[0].split(":")
                out, passes, seconds = session(pair, ids, args.tokens, int(k), DrafterConfig(name))
                runs[cell].append([len(out), passes, seconds, out == reference])
    switch(pair.target, True)
    arr = {c: np.array([r[:3] for r in v], dtype=float) for c, v in runs.items()}
    speed = lambda x, i: x[i, 0].sum() / x[i, 2].sum()  # noqa: E731
    every = np.arange(len(arr["alone"]))
    boot_rng = np.random.default_rng(0)
    where = machine()
    base = speed(arr["alone"], every)
    print(f"{where['cpu']} (flags: {', '.join(where['cpu_flags']) or 'none it looks for'}); "
          f"{name} float32, greedy, {len(prompts)} questions x {args.repeats}, {args.tokens} "
          f"tokens, {args.clock} clock; target alone {base:.1f} tokens/s")  # fmt: skip
    for config in configs:
        for packed in (False, True):
            a = arr[(config, packed)]
            same = sum(bool(r[3]) for r in runs[(config, packed)])
            line = (f"  {config:10s} {'packed' if packed else 'plain ':6s} #MAT "
                    f"{a[:, 0].sum() / a[:, 1].sum():.3f}  {speed(a, every) / base:.3f}x "
                    f"the target alone  same text {same}/{len(a)}")  # fmt: skip
            if packed:
                p = arr[(config, False)]
                boot = [speed(a, i) / speed(p, i) for i in
                        (boot_rng.integers(0, len(a), len(a)) for _ in range(2000))]  # fmt: skip
                lo, hi = np.percentile(boot, 2.5), np.percentile(boot, 97.5)
                line += (
                    f"  packed/plain {speed(a, every) / speed(p, every):.3f}x [{lo:.3f}, {hi:.3f}]"
                )
            print(line)
    return 0


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
