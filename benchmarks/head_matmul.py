"""F.linear against W @ x^T for an LM head on a few rows (a verification's K+1 positions).

On this CPU, F.linear repacks a large weight on every call with more than one row; the
engine therefore computes large heads as W @ x^T (specviz.core.models.pair.speed_up_head).

    python benchmarks/head_matmul.py
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F


def ms(fn, n: int = 30) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return 1000 * (time.perf_counter() - start) / n


def main() -> None:
    for vocab, width in ((49152, 576), (8192, 192)):
        weight = torch.randn(vocab, width)
        for rows in (1, 2, 3, 5, 9):
            x = torch.randn(rows, width)
            linear = ms(lambda x=x, w=weight: F.linear(x, w))
            matmul = ms(lambda x=x, w=weight: (w @ x.T).T)
            print(
                f"head {vocab}x{width}  rows {rows}:  F.linear {linear:6.2f} ms   "
                f"W @ x^T {matmul:6.2f} ms   ratio {linear / matmul:4.2f}"
            )


if __name__ == "__main__":
    main()
