"""Synthetic traces (tests/fixtures.py: consistent records of any length, for the reader's
tests and benchmarks/trace_load.py) are valid; a 5k-round trace loads with progress and
memory proportional to it."""

from __future__ import annotations

import tracemalloc

from specviz.core.trace.check_session import check_session
from specviz.core.trace.files import load, write_atomic
from tests.fixtures import synthetic_lines, synthetic_session


def test_synthetic_session_is_valid():
    session = synthetic_session(50, seed=3)
    assert check_session(session) == []
    assert {t.status for r in session.rounds for t in r.tokens} == set(
        ("accepted", "rejected", "discarded", "resampled", "bonus")
    )


def test_big_trace_loads_with_progress_and_proportional_memory(tmp_path):
    path = tmp_path / "big.jsonl"
    write_atomic(path, synthetic_lines(5000, top_n=4))
    size = path.stat().st_size
    seen: list[float] = []
    session = load(path, progress=seen.append)
    assert len(session.rounds) == 5000 and session.warnings == []
    assert 50 <= len(seen) <= 110  # about every 1% of the bytes
    assert seen == sorted(seen) and seen[-1] == 1.0 and 0 < seen[0] < 0.05
    del session

    # Memory: each round's line (its top-N lists stay unparsed in it) and the records of
    # the other fields, under twice the file (1.66 measured); the file is never held whole.
    small = tmp_path / "small.jsonl"
    write_atomic(small, synthetic_lines(300, top_n=20))
    tracemalloc.start()
    try:
        session = load(small)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    small_size = small.stat().st_size
    assert held < 2 * small_size, (held, small_size)
    assert all(session.lines.text(i) is not None for i in range(300))  # kept, lists unparsed
    assert all(t.top == () for r in session.rounds for t in r.tokens)
    assert peak - held < small_size / 4, (peak, held, small_size)
    assert len(session.rounds) == 300
    assert size > small_size
