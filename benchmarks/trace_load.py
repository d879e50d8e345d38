"""How long a huge trace takes to load, and how much memory it holds.

Writes a synthetic, consistent trace (tests/fixtures.py: K drafts and the top-N
[id, p, q] lists of every position, full-precision floats, as the app records them), then
measures, each in a fresh process:

- core: tracefile.load (top-N lists left in each round's line), the checks the app runs on
  open (validate without the top-N lists), the full checks of `specviz inspect`, the stats
  fold, and the peak resident memory;
- --baseline: the same file read eagerly, every field of every line parsed with json as the
  reader did before, for the ratio eager / load;
- --gui: the main window (offscreen) opening the trace and drawing all of its rounds.

Not a test: never part of the test run.

    python benchmarks/trace_load.py --rounds 100000 --top-n 20 --gui
    python benchmarks/trace_load.py --rounds 20000 --baseline
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

CORE = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from specviz.core.metrics.running import fold
from specviz.core.trace.files import load
from specviz.core.trace.check_session import check_session
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
reports = []
start = time.perf_counter()
session = load(sys.argv[1], progress=reports.append)
loaded = time.perf_counter()
problems = check_session(session, limit=10, top_lists=False)
checked = time.perf_counter()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
full = check_session(session, limit=10)
inspected = time.perf_counter()
stats = fold(session)
folded = time.perf_counter()
print(json.dumps({
    "rounds": len(session.rounds),
    "tokens": stats.emitted,
    "load_s": loaded - start,
    "validate_on_open_s": checked - loaded,
    "validate_full_s": inspected - checked,
    "fold_s": folded - inspected,
    "progress_calls": len(reports),
    "problems": len(problems) + len(full),
    "rss_before_load_mib": base / 1024,
    "peak_rss_mib": peak / 1024,
}))
"""

EAGER = """
import json, sys, time
sys.path.insert(0, sys.argv[2])
from specviz.core.trace.files import parse_lines
start = time.perf_counter()
with open(sys.argv[1], encoding="utf-8") as f:
    session = parse_lines(f)  # str lines: every field parsed with json, as before
print(json.dumps({"eager_load_s": time.perf_counter() - start, "rounds": len(session.rounds)}))
"""

GUI = """
import json, os, resource, sys, time
os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["SPECVIZ_NO_DIALOGS"] = "1"
sys.path.insert(0, sys.argv[2])
from PySide6.QtWidgets import QApplication
from specviz.gui.qtfixes import refguard
refguard.install()
app = QApplication([])
from specviz.gui.main_window import MainWindow
window = MainWindow(autosave=False)
window.resize(1400, 900)
window.show()
app.processEvents()
start = time.perf_counter()
assert window.files.open_trace(sys.argv[1])
opened = time.perf_counter()
while window.controller.drawing:
    app.processEvents()
drawn = time.perf_counter()
print(json.dumps({
    "gui_open_s": opened - start,
    "gui_draw_s": drawn - opened,
    "gui_total_s": drawn - start,
    "gui_rounds": len(window.session.rounds),
    "gui_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
sys.stdout.flush()
os._exit(0)
"""


def child(code: str, path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "SPECVIZ_NO_DIALOGS": "1"},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100_000)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--top-n", type=int, default=20)
    parser.add_argument("--trace", help="write (or with --reuse, read) the trace here")
    parser.add_argument("--reuse", action="store_true", help="load --trace as it is")
    parser.add_argument("--baseline", action="store_true", help="also read it eagerly")
    parser.add_argument("--gui", action="store_true", help="also open it in the window")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from specviz.core.trace.files import write_atomic
    from tests.fixtures import synthetic_lines

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.trace) if args.trace else Path(tmp) / "big.jsonl"
        generate_s = None
        if not args.reuse:
            start = time.perf_counter()
            write_atomic(path, synthetic_lines(args.rounds, k=args.k, top_n=args.top_n))
            generate_s = time.perf_counter() - start
        size = path.stat().st_size
        measured = child(CORE, path)
        if args.baseline:
            measured.update(child(EAGER, path))
        if args.gui:
            measured.update(child(GUI, path))
    result = {
        "k": args.k,
        "top_n": args.top_n,
        "file_bytes": size,
        "bytes_per_round": size / args.rounds,
        "generate_s": generate_s,
        **measured,
    }
    if args.baseline:
        result["eager_over_load"] = result["eager_load_s"] / result["load_s"]
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
