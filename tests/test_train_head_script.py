"""scripts/train_head.py's batch schedule: `total` steps over epochs whose shuffles give
different counts of batches (counting steps by the first epoch's count once looped for
ever at the end of the second)."""

from __future__ import annotations

import random

from scripts import train_head


def test_the_stream_gives_every_step_a_batch_whatever_each_epoch_holds():
    seqs = [{"ids": [0] * n} for n in (3, 9, 4, 8, 2, 7, 5, 6, 9, 3, 8, 2)]
    counts = [sum(1 for _ in train_head.batches(seqs, 12, random.Random(e))) for e in range(6)]
    assert len(set(counts)) > 1  # the shuffles pack differently: the case that looped
    total = 2 * counts[0] + 3  # past the end of the second epoch
    taken = list(train_head.batch_stream(seqs, 12, 0, total))
    assert len(taken) == total
    flat = [id(s) for batch in taken[: counts[0]] for s in batch]
    assert sorted(flat) == sorted(id(s) for s in seqs)  # the first epoch sees each once
