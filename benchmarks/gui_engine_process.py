"""The window's tokens/s with its engine in a child process (`specviz --engine process`)
against the in-thread worker (`--engine thread`, the default) and the headless engine, on
the same pair, prompt, settings and seed, interleaved (headless, thread, process, headless,
...), medians, as ratios to headless (issue 16's goal: process >= 0.90).

Each window runs Run until max new tokens inside a real event loop, autosave on, timed from
the first round's arrival to the last one's (model load, session start and calibration
excluded: benchmarks/gui_redraw.py's window_tokens_per_s); the headless engine is timed the
same way (SpeculativeEngine.run in this process). The child engine is `specviz serve --port
0` on 127.0.0.1, a fresh one per window. Not a test: never part of the test run.

    QT_QPA_PLATFORM=offscreen python benchmarks/gui_engine_process.py --pair tiny \\
        --max-new-tokens 300 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SPECVIZ_NO_DIALOGS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))  # gui_redraw

from gui_redraw import headless_tokens_per_s, window_tokens_per_s  # noqa: E402

from specviz.core.models import load_pair  # noqa: E402
from specviz.core.prompts import example_prompts  # noqa: E402
from specviz.core.trace import Settings  # noqa: E402

MODES = ("headless", "thread", "process")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="tiny", help="a built-in pair (builtin:NAME)")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5, help="runs of each mode")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from PySide6.QtWidgets import QApplication
    from transformers.utils import logging as hf_logging

    from specviz.gui import refguard
    from specviz.gui.remote_worker import RemoteEngineThread

    hf_logging.disable_progress_bar()
    refguard.install()
    app = QApplication.instance() or QApplication([])
    spec = f"builtin:{args.pair}"
    pair = load_pair(spec, spec)
    settings = Settings(k=args.k, seed=1, max_new_tokens=args.max_new_tokens)
    prompt = example_prompts()[1]
    runs: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(args.repeats):  # interleaved
        runs["headless"].append(headless_tokens_per_s(pair, settings, prompt))
        runs["thread"].append(window_tokens_per_s(app, (spec, spec), settings, prompt))
        runs["process"].append(
            window_tokens_per_s(app, (spec, spec), settings, prompt, engine=RemoteEngineThread())
        )
    result: dict = {"pair": spec, "k": args.k, "max_new_tokens": args.max_new_tokens}
    for mode in MODES:
        result[f"{mode}_tokens_per_s"] = statistics.median(runs[mode])
    headless = result["headless_tokens_per_s"]
    result["thread_over_headless"] = result["thread_tokens_per_s"] / headless
    result["process_over_headless"] = result["process_tokens_per_s"] / headless
    result["process_over_thread"] = result["process_tokens_per_s"] / result["thread_tokens_per_s"]
    result["load_average"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for key, value in result.items():
            print(f"{key:28s} {value:.3f}" if isinstance(value, float) else f"{key:28s} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
