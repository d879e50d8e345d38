"""How many torch threads an engine runs with: one per core but one, by default.

torch's intra-op threads meet at a barrier after every operation, so with one thread per
core any other work on the machine (a window's painting, the operating system, another
process) holds all of them up at the next barrier. Measured on a 2-core machine
(benchmarks/speedup_spread.py, tiny pair, K 4, 128 tokens): with 2 threads and one busy
process beside the session, target-only decoding went from 3 to 14-122 ms a token and every
speedup interval spanned 10x; with 1 thread, 2.8 ms and four sessions within 1.12x of each
other. Leaving a core costs little on a large machine and keeps the measurements (and a
window) alive on a small one.
"""

from __future__ import annotations

import os


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 2


def default_threads() -> int:
    return max(1, cores() - 1)


def set_threads(n: int | None) -> int:
    """Set torch's intra-op threads (None: default_threads()); the number set."""
    import torch

    n = default_threads() if n is None else n
    torch.set_num_threads(n)
    return n
