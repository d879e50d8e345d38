"""An EAGLE-3 head's draft step against the time to read its weights once and the target's
pass, side by side in one process (issue 50: a head sized for speed). Not a test: never part
of the test run.

For each configuration (a built-in pair, a dtype, its shipped head or another --head), after
a context of --context tokens (the target's prefill, its states handed to the head as the
engine does):

- step: one draft step as the engine runs it, `Eagle3Drafter.propose` itself, greedy: the
  time of a proposal of 1 + S drafts minus that of 1 draft, over S (each step: the head's
  pass on the last draft and its own state, its cache and mask, the logits put on the
  target's vocabulary, warp and sample), the two proposals alternated. The drafter's state
  is restored after each call.
- floor: the time to read the weights a step reads once (the decoder layer's, the final
  norm's and lm_head's; not fc, which reads the target's states only when they arrive): one
  row times a [P / H, H] matrix of the same dtype holding as many elements, F.linear as
  nn.Linear runs it. A step cannot be faster than reading its weights.
- target 1 / target K+1: the target's cached pass over 1 token (what target-only decoding
  does per token) and over K+1 tokens with the head's aux states (a verification).

Every measurement is taken --inner times per repeat (the fastest kept: the least disturbed
by other processes on a small machine), on this thread's CPU clock by default (one torch
thread: time the core was given to other processes is not counted; their use of the shared
caches and memory still is); the order of all
configurations' measurements is shuffled per repeat, so load from other processes falls on
all of them alike. Reported: medians over repeats of each time, and of the per-repeat ratios
step / floor and step / target 1 (the engine's cost ratio c), with their spread (min-max).

    python benchmarks/head_step.py
    python benchmarks/head_step.py --pairs smollm2 --dtypes float32 --head smollm2=/tmp/pruned8k
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from transformers import DynamicCache  # noqa: E402

from specviz.core.decoding.forward import forward, forward_states  # noqa: E402
from specviz.core.decoding.kv_cache import crop_to  # noqa: E402
from specviz.core.decoding.warp import SamplingConfig  # noqa: E402
from specviz.core.drafters.registry import DrafterConfig, make_drafter  # noqa: E402
from specviz.core.engine.threads import set_threads  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402
from specviz.core.resources import example_prompts  # noqa: E402

GREEDY = SamplingConfig(temperature=0)


def context_ids(tokenizer, n: int) -> list[int]:
    """n token ids of the example prompts, repeated as needed."""
    text = " ".join(example_prompts())
    ids = tokenizer(text)["input_ids"]
    while len(ids) < n:
        ids = ids + ids
    return ids[:n]


class Config:
    """One pair, dtype and head: its drafter after a context, and the timed calls."""

    def __init__(self, pair_name: str, dtype: str, head: str | None, k: int, steps: int,
                 context: int):  # fmt: skip
        self.name = f"{pair_name} {dtype}" + (f" {head}" if head else "")
        pair = load_pair(f"builtin:{pair_name}", None, dtype=dtype)
        self.pair, self.k, self.steps = pair, k, steps
        self.drafter = make_drafter(DrafterConfig("eagle3", head=head), pair)
        ids = context_ids(pair.tokenizer, context)
        self.ids = ids
        self.cache = DynamicCache()  # the target's, over ids[:-1]
        with torch.inference_mode():
            _, states = forward_states(pair.target, ids[:-1], self.cache, pair.vocab_size, 1,
                                       self.drafter.target_layers)  # fmt: skip
            self.drafter.accept_states(states)
            self.drafter.prefill(ids, self.cache)
        head_ = self.drafter.head
        read = [*head_.layers[0].parameters(), *head_.norm.parameters(), head_.lm_head.weight]
        self.params = sum(p.numel() for p in read)
        self.bytes = sum(p.numel() * p.element_size() for p in read)
        width = head_.config.hidden
        w_dtype = head_.lm_head.weight.dtype
        self.weight = torch.randn(math.ceil(self.params / width), width).to(w_dtype)
        self.row = torch.randn(1, width).to(w_dtype)
        self.draft_vocab = head_.config.draft_vocab

    def propose(self, n: int) -> None:
        """One proposal of n drafts, greedy, the drafter's state put back after it."""
        d = self.drafter
        fed, pending, last = d.fed, d.pending, d.last_out
        proposal = d.propose(self.ids, n, GREEDY, None, None)
        if len(proposal.tokens) != n:
            raise RuntimeError(f"{self.name}: drafting stopped early ({proposal.stop})")
        d.rollback(fed)
        d.fed, d.pending, d.last_out = fed, pending, last

    def floor(self) -> None:
        torch.nn.functional.linear(self.row, self.weight)

    def target(self, n: int) -> None:
        """The target's pass over n tokens after the context (with the aux states for a
        verification), cropped back."""
        length = self.cache.get_seq_length()
        tokens = self.ids[-1:] * n
        if n == 1:
            forward(self.pair.target, tokens, self.cache, self.pair.vocab_size, 1)
        else:
            forward_states(self.pair.target, tokens, self.cache, self.pair.vocab_size, n,
                           self.drafter.target_layers)  # fmt: skip
        crop_to(self.cache, length)

    def step(self, inner: int) -> float:
        """ms of one draft step: proposals of 1 and 1 + S drafts alternated `inner` times,
        (the fastest of 1 + S - the fastest of 1) / S."""
        one, more = [], []
        for _ in range(inner):
            one.append(timed(lambda: self.propose(1), 1))
            more.append(timed(lambda: self.propose(1 + self.steps), 1))
        return (min(more) - min(one)) / self.steps

    def measures(self, inner: int) -> dict:
        return {
            "step": lambda: self.step(inner),
            "floor": lambda: timed(self.floor, inner),
            "target_1": lambda: timed(lambda: self.target(1), inner),
            "target_k1": lambda: timed(lambda: self.target(self.k + 1), inner),
        }


CLOCK = {"cpu": time.thread_time, "wall": time.perf_counter}
clock = time.thread_time  # main() sets it


def add_clock_arguments(parser: argparse.ArgumentParser) -> None:
    """--threads and --clock, as head_step.py and head_speed.py take them."""
    parser.add_argument("--threads", type=int, default=None, help="default: the engine's")
    parser.add_argument("--clock", choices=tuple(CLOCK), default=None,
                        help="cpu: this thread's CPU time (time.thread_time: a process that "
                        "other work takes the core from is not charged for the wait; one "
                        "torch thread only); wall: elapsed time (default: cpu with one "
                        "thread, else wall)")  # fmt: skip


def choose_clock(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Set torch's threads and the module's clock from --threads and --clock (args.clock is
    set to the name chosen); the threads."""
    global clock
    threads = set_threads(args.threads)
    args.clock = args.clock or ("cpu" if threads == 1 else "wall")
    if args.clock == "cpu" and threads != 1:
        parser.error("--clock cpu measures one thread: give --threads 1")
    clock = CLOCK[args.clock]
    return threads


def timed(fn, inner: int) -> float:
    """The fastest of `inner` calls, ms (the least disturbed by other processes)."""
    times = []
    for _ in range(inner):
        start = clock()
        fn()
        times.append(1000 * (clock() - start))
    return min(times)


def ratios(a: list[float], b: list[float]) -> list[float]:
    """Per-repeat ratios a / b (taken in the same repeat)."""
    return [x / y for x, y in zip(a, b, strict=True)]


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", default="tiny,smollm2")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--head", action="append", default=[], metavar="PAIR=DIR",
                        help="also measure this head on PAIR (repeatable)")  # fmt: skip
    parser.add_argument("--only-heads", action="store_true",
                        help="measure the --head heads only, not the shipped ones")  # fmt: skip
    parser.add_argument("--k", type=int, default=4, help="drafts a verification judges")
    parser.add_argument("--steps", type=int, default=4, help="steps timed per proposal")
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--inner", type=int, default=5)
    add_clock_arguments(parser)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    threads = choose_clock(parser, args)
    extra = [h.split("=", 1) for h in args.head]
    configs = []
    for pair in args.pairs.split(","):
        for dtype in args.dtypes.split(","):
            heads = [None] if not args.only_heads else []
            heads += [d for p, d in extra if p == pair]
            for head in heads:
                configs.append(Config(pair, dtype, head, args.k, args.steps, args.context))
    items = [(c, name, fn) for c in configs for name, fn in c.measures(args.inner).items()]
    times = {(c.name, name): [] for c, name, _ in items}
    rng = random.Random(0)
    with torch.inference_mode():
        for _c, _, fn in items:  # warm-up
            fn()
        for _ in range(args.repeats):
            rng.shuffle(items)
            for c, name, fn in items:
                times[(c.name, name)].append(fn())
    rows = []
    for c in configs:
        t = {name: times[(c.name, name)] for name in c.measures(args.inner)}
        step = t["step"]
        rows.append({
            "config": c.name, "draft_vocab": c.draft_vocab, "params_read": c.params,
            "mb_read": c.bytes / 2**20,
            "step_ms": spread(step),
            "floor_ms": spread(t["floor"]),
            "target_1_ms": spread(t["target_1"]),
            "target_k1_ms": spread(t["target_k1"]),
            "step_over_floor": spread(ratios(step, t["floor"])),
            "cost_ratio": spread(ratios(step, t["target_1"])),
            "step_over_target_k1": spread(ratios(step, t["target_k1"])),
        })  # fmt: skip
    if args.json:
        print(json.dumps({"threads": threads, "clock": args.clock, "k": args.k,
                          "context": args.context,
                          "repeats": args.repeats, "rows": rows}, indent=1))  # fmt: skip
        return 0
    print(f"{threads} thread(s), {args.clock} clock, context {args.context}, K {args.k}, "
          f"{args.repeats} repeats of the fastest of {args.inner}, medians [min-max over "
          "repeats]")  # fmt: skip
    head = (f"{'configuration':<34}{'Vd':>7}{'MB':>6}{'step ms':>9}{'floor ms':>9}"
            f"{'step/floor':>20}{'T(1) ms':>9}{'T(K+1) ms':>10}{'c = step/T(1)':>24}")  # fmt: skip
    print(head)
    for r in rows:

        def cell(s, fmt):
            return f"{fmt.format(s['median'])} [{fmt.format(s['min'])}-{fmt.format(s['max'])}]"

        print(f"{r['config']:<34}{r['draft_vocab']:>7}{r['mb_read']:>6.1f}"
              f"{r['step_ms']['median']:>9.3f}{r['floor_ms']['median']:>9.3f}"
              f"{cell(r['step_over_floor'], '{:.2f}'):>20}"
              f"{r['target_1_ms']['median']:>9.2f}{r['target_k1_ms']['median']:>10.2f}"
              f"{cell(r['cost_ratio'], '{:.4f}'):>24}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
