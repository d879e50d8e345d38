"""What the target's verify pass over k tokens costs against a pass over one, on this CPU, and
where the difference goes. Not a test.

Speculation pays only when the tokens a round keeps outnumber what its pass costs in
single-token passes: a round's gain is at most #MAT / (T(K+1)/T(1) + K c). On a CPU with
bf16 units T(5) is close to T(1) (the pass reads its weights once either way); on one
without them, in float32, the matrix products over a few rows are compute-bound and T(5)
can cost nearly two T(1). This prints, in one process with the sizes interleaved per repeat
(CPU clock of the one torch thread the engine runs by default, medians):

- T(k) for k = 1..8 after a prefill, and T(k)/T(1);
- the share of T(1) and T(5) spent in matrix products (torch.profiler, aten::mm/addmm);
- the rate of the BLAS torch uses against numpy's (each multiplying 1024 x 1024 matrices,
  weights in cache), which says whether torch's products run at what this CPU can do.

    python benchmarks/verify_pass.py --pair smollm2
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's BLAS on one thread, as torch's
import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from specviz.core.models import packed_linear  # noqa: E402
from specviz.core.models.builtin import get_pair  # noqa: E402
from specviz.core.models.dtype_probe import machine  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402

SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16)
PRODUCTS = ("aten::mm", "aten::addmm", "mkldnn::_linear_pointwise")


def pass_ms(model, cache, k: int) -> float:
    """One cached pass over k new tokens, in ms of this thread's CPU time; the cache is
    cropped back to what it held."""
    ids = torch.randint(100, 20000, (1, k))
    start = time.thread_time()
    model(input_ids=ids, past_key_values=cache, use_cache=True)
    spent = time.thread_time() - start
    cache.crop(-k)  # transformers 5 crops by a negative count
    return 1e3 * spent


def product_share(model, cache, k: int) -> float:
    """The share of a k-token pass's CPU time in matrix products (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    ids = torch.randint(100, 20000, (1, k))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            model(input_ids=ids, past_key_values=cache, use_cache=True)
            cache.crop(-k)  # transformers 5 crops by a negative count
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    mm = sum(e.self_cpu_time_total for e in events if e.key in PRODUCTS)
    return mm / total


def gflops(multiply, repeats: int = 5) -> float:
    """The best rate of a 1024 x 1024 float32 matrix product through `multiply`."""
    a, b = (
        np.random.rand(1024, 1024).astype(np.float32),
        np.random.rand(1024, 1024).astype(np.float32),
    )
    multiply(a, b)
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        multiply(a, b)
        best = min(best, time.thread_time() - start)
    return 2 * 1024**3 / best / 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="smollm2", help="a built-in pair's target")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--prefix", type=int, default=128, help="cached tokens before a pass")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    random.seed(0)
    from transformers import DynamicCache

    pair = load_pair(f"builtin:{get_pair(args.pair).name}", None, dtype=args.dtype)
    model = pair.target.eval()
    modes = ("plain", "packed") if packed_linear.packed_bytes(model) else ("plain",)
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=torch.randint(100, 20000, (1, args.prefix)), past_key_values=cache,
              use_cache=True)  # fmt: skip
        times: dict[tuple[str, int], list[float]] = {(m, k): [] for m in modes for k in SIZES}
        for _ in range(args.repeats):
            order = list(times)
            random.shuffle(order)
            for mode, k in order:
                packed_linear.switch(model, mode == "packed")
                times[(mode, k)].append(pass_ms(model, cache, k))
        shares = {}
        for mode in modes:
            packed_linear.switch(model, mode == "packed")
            shares[mode] = {k: product_share(model, cache, k) for k in (1, 5)}
    t1 = statistics.median(times[("plain", 1)])
    where = machine()
    flags = ", ".join(where["cpu_flags"]) or "none of those it looks for"
    print(f"{where['cpu']} (flags: {flags}); builtin:{args.pair} target, {args.dtype}, "
          f"1 torch thread, {args.prefix} cached tokens, medians of {args.repeats}")  # fmt: skip
    if len(modes) == 1:
        print("(no packed products: not float32 on the CPU, oneDNN absent, or switched off)")
    head = "  k   T(k) ms   T(k)/T(1)" + ("   packed ms   /T(1)   plain/packed [range]"
                                          if len(modes) == 2 else "")  # fmt: skip
    print(head)
    for k in SIZES:
        plain = times[("plain", k)]
        line = f"{k:3d}  {statistics.median(plain):8.1f}  {statistics.median(plain) / t1:9.2f}"
        if len(modes) == 2:
            packed = times[("packed", k)]
            ratios = sorted(a / b for a, b in zip(plain, packed, strict=True))  # per repeat
            line += (
                f"  {statistics.median(packed):10.1f}  {statistics.median(packed) / t1:6.2f}"
                f"   {statistics.median(ratios):.2f} [{ratios[0]:.2f}-{ratios[-1]:.2f}]"
            )
        print(line)
    for mode in modes:
        print(f"matrix products ({mode}): {shares[mode][1]:.0%} of T(1), "
              f"{shares[mode][5]:.0%} of T(5)")  # fmt: skip
    torch_rate = gflops(lambda a, b: torch.from_numpy(a) @ torch.from_numpy(b))
    numpy_rate = gflops(lambda a, b: a @ b)
    print(f"float32 1024^3 product, 1 thread: torch {torch_rate:.0f} GFLOP/s, numpy "
          f"{numpy_rate:.0f} GFLOP/s ({torch_rate / numpy_rate:.2f}x)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
