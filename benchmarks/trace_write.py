"""How long writing a trace's lines takes: specviz's writer (orjson) against json with the
cleaning pass it replaced, on the same rounds, interleaved in one process; then a round record
to its line as the autosave and `specviz serve` make it (round_to_json + orjson bytes)
against the same with dataclasses.asdict for the round's settings, as before. Not a test.

    python benchmarks/trace_write.py --rounds 2000 --top-n 20
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout


def json_line(obj) -> str:
    """The writer before: tuples to lists and non-finite floats to null, then json."""

    def clean(value):
        if isinstance(value, float):
            return value if math.isfinite(value) else None
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return value

    return json.dumps(clean(obj), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def round_line_asdict(rnd) -> bytes:
    """A round's line with its settings made by dataclasses.asdict, as round_to_json made
    them before (plus the 8-field dict it now makes, a microsecond, thrown away here)."""
    import dataclasses

    from specviz.core.trace.serialize import dumps_bytes, round_to_json

    obj = round_to_json(rnd)
    if rnd.settings is not None:
        obj["settings"] = dataclasses.asdict(rnd.settings)
    return dumps_bytes(obj)


def main() -> int:
    from specviz.core.trace.serialize import dumps, dumps_bytes, round_to_json
    from tests.fixtures import synthetic_session

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--top-n", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rounds = synthetic_session(args.rounds, top_n=args.top_n).rounds
    objs = [round_to_json(r) for r in rounds]
    assert all(json.loads(dumps(o)) == json.loads(json_line(o)) for o in objs[:50])
    timings: dict[str, list[float]] = {"orjson": [], "json": []}
    for _ in range(args.repeats):
        for name, write in (("orjson", dumps), ("json", json_line)):
            start = time.perf_counter()
            size = sum(len(write(o)) for o in objs)
            timings[name].append(time.perf_counter() - start)
    now, before = (statistics.median(timings[k]) for k in ("orjson", "json"))
    print(f"{args.rounds} rounds, top-N {args.top_n}, {size / 1e6:.1f} MB of lines")
    print(f"specviz (orjson) {now:.3f} s, json + cleaning {before:.3f} s: {before / now:.1f}x")

    def round_line(rnd) -> bytes:
        return dumps_bytes(round_to_json(rnd))

    assert all(round_line(r) == round_line_asdict(r) for r in rounds[:50])
    timings = {"now": [], "asdict": []}
    for _ in range(args.repeats):
        for name, write in (("now", round_line), ("asdict", round_line_asdict)):
            start = time.perf_counter()
            for rnd in rounds:
                write(rnd)
            timings[name].append(time.perf_counter() - start)
    now, before = (1000 * statistics.median(timings[k]) / len(rounds) for k in ("now", "asdict"))
    print(
        f"a round record to its line: {now:.3f} ms, with asdict for its settings {before:.3f} ms:"
        f" {before / now:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
