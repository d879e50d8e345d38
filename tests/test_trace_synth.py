"""Synthetic traces (no models): consistent records of any length, for the reader's tests and
benchmarks/trace_load.py; and the big-file test: a 5k-round trace loads with progress and
memory proportional to it."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Iterator

from specviz.core.session import Session
from specviz.core.trace import (
    ModelInfo,
    Round,
    SessionHeader,
    Settings,
    TokenEvent,
    dumps,
    header_to_json,
    round_to_json,
)
from specviz.core.tracefile import load, write_atomic
from specviz.core.validate import check_session

TEXTS = [" the", " and", " of", " God", " earth", "ly", ",", ".", " é", "\n", ' "q"', "日本"]


def synthetic_header(k: int = 4, top_n: int = 20, prompt_len: int = 8) -> SessionHeader:
    model = ModelInfo("synthetic", "synthetic", 50257, 1_000_000, "float32", "cpu")
    return SessionHeader(
        session_id="synthetic0001",
        prompt="In the beginning",
        prompt_ids=tuple(range(100, 100 + prompt_len)),
        prompt_text=tuple(TEXTS[i % len(TEXTS)] for i in range(prompt_len)),
        target=model,
        draft=model,
        settings=Settings(k=k, top_n=max(top_n, 1), max_new_tokens=10**9),
        created="2026-11-29T00:00:00+00:00",
        specviz="0.1.0",
        baseline_ms_per_token=10.0,
        draft_ms_per_token=2.0,
    )


def _tops(rng: random.Random, n: int, count: int = 16) -> list:
    """A pool of top-N lists (id, p, q) with full-precision floats, reused across positions."""
    pool = []
    for _ in range(count):
        entries = [(rng.randrange(50257), rng.random() / 20, rng.random() / 20) for _ in range(n)]
        pool.append(tuple(entries))
    return pool


def synthetic_rounds(
    header: SessionHeader,
    n_rounds: int,
    seed: int = 0,
    eos_last: bool = False,
    top_n: int | None = None,
) -> Iterator[Round]:
    """Rounds that obey every rule specviz.core.validate checks (accept_prob = min(1, p/q),
    u against it, status order, counts, context_len). top_n = 0: no top-N lists, as a
    session run with trace=False."""
    rng = random.Random(seed)
    k = header.settings.k
    top_n = header.settings.top_n if top_n is None else top_n
    pool = _tops(rng, top_n) if top_n else [()]
    texts = [tuple(TEXTS[(i * 7 + j) % len(TEXTS)] for j in range(top_n)) for i in range(4)]
    context = len(header.prompt_ids)
    for index in range(n_rounds):
        tokens: list[TokenEvent] = []
        rejected = False
        for _ in range(k):
            top = rng.choice(pool)
            tid, text = rng.randrange(50257), rng.choice(TEXTS)
            if rejected:
                tokens.append(
                    TokenEvent(tid, text, "discarded", q=rng.random(), top=top, top_text=texts[0])
                )
                continue
            p, q, u = rng.random(), rng.random(), rng.random()
            accept = min(1.0, p / q)
            status = "accepted" if u < accept else "rejected"
            rejected = status == "rejected"
            tokens.append(
                TokenEvent(
                    tid, text, status, p=p, q=q, accept_prob=accept, u=u, alpha=rng.random(),
                    top=top, top_text=texts[1], p_rest=0.25, q_rest=0.5,
                )
            )  # fmt: skip
        last = index == n_rounds - 1
        if not (eos_last and last):
            status = "resampled" if rejected else "bonus"
            tokens.append(
                TokenEvent(
                    rng.randrange(50257), rng.choice(TEXTS), status, p=rng.random(),
                    residual=rng.random() if rejected else None, top=rng.choice(pool),
                    top_text=texts[2], residual_top=tuple((i, 0.01) for i in range(top_n)),
                )
            )  # fmt: skip
        n_accepted = sum(t.status == "accepted" for t in tokens)
        rnd = Round(
            session_id=header.session_id,
            index=index,
            context_len=context,
            draft_ms=rng.random() * 5,
            verify_ms=rng.random() * 10,
            n_drafted=k,
            n_accepted=n_accepted,
            tokens=tuple(tokens),
            settings=header.settings,
            finish_reason=("eos" if eos_last else "max_new_tokens") if last else None,
        )
        context += rnd.n_emitted
        yield rnd


def synthetic_session(n_rounds: int = 20, k: int = 4, top_n: int = 20, **kwargs) -> Session:
    header = synthetic_header(k=k, top_n=top_n)
    return Session(header, list(synthetic_rounds(header, n_rounds, top_n=top_n, **kwargs)))


def synthetic_lines(n_rounds: int, k: int = 4, top_n: int = 20, seed: int = 0) -> Iterator[str]:
    """A trace's lines, one round at a time (no summary line): any length, little memory."""
    header = synthetic_header(k=k, top_n=top_n)
    yield dumps(header_to_json(header))
    for rnd in synthetic_rounds(header, n_rounds, seed=seed, top_n=top_n):
        yield dumps(round_to_json(rnd))


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
    assert all(r.source is not None for r in session.rounds)
    assert peak - held < small_size / 4, (peak, held, small_size)
    assert len(session.rounds) == 300
    assert size > small_size
