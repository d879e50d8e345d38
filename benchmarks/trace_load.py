"""How long a huge trace takes to load, and how much memory it holds.

Writes a synthetic, consistent trace (tests/test_trace_synth.py: K drafts and the top-N
[id, p, q] lists of every position, full-precision floats, as the app records them), then
loads it in a fresh process and reports the wall time of tracefile.load, of validate, and
of the stats fold, the file size, and the process's peak resident memory. Not a test:
never part of the test run.

    python benchmarks/trace_load.py --rounds 100000 --top-n 20
    python benchmarks/trace_load.py --rounds 100000 --top-n 0 --json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

CHILD = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from specviz.core.stats import fold
from specviz.core.tracefile import load
from specviz.core.validate import check_session
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
reports = []
start = time.perf_counter()
session = load(sys.argv[1], progress=reports.append)
loaded = time.perf_counter()
problems = check_session(session, limit=10)
checked = time.perf_counter()
stats = fold(session)
folded = time.perf_counter()
print(json.dumps({
    "rounds": len(session.rounds),
    "tokens": stats.emitted,
    "load_s": loaded - start,
    "validate_s": checked - loaded,
    "fold_s": folded - checked,
    "progress_calls": len(reports),
    "problems": len(problems),
    "rss_before_load_mib": base / 1024,
    "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100_000)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--top-n", type=int, default=20)
    parser.add_argument("--trace", help="write (or with --reuse, read) the trace here")
    parser.add_argument("--reuse", action="store_true", help="load --trace as it is")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from specviz.core.tracefile import write_atomic
    from tests.test_trace_synth import synthetic_lines

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.trace) if args.trace else Path(tmp) / "big.jsonl"
        generate_s = None
        if not args.reuse:
            start = time.perf_counter()
            write_atomic(path, synthetic_lines(args.rounds, k=args.k, top_n=args.top_n))
            generate_s = time.perf_counter() - start
        size = path.stat().st_size
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(path), str(ROOT)],
            check=True,
            capture_output=True,
            text=True,
        )
    result = {
        "k": args.k,
        "top_n": args.top_n,
        "file_bytes": size,
        "bytes_per_round": size / args.rounds,
        "generate_s": generate_s,
        **json.loads(child.stdout),
    }
    result["peak_rss_over_file"] = (
        (result["peak_rss_mib"] - result["rss_before_load_mib"]) * 2**20 / size
    )
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            shown = f"{value:.3f}" if isinstance(value, float) else value
            print(f"{key:22s} {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
