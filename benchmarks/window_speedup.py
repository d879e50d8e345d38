"""Does the window show the speedup `specviz run` measures? The same settings, interleaved:
(a) a headless session, as `specviz run` (its summary's measured speedup and interval);
(b) the window, its engine on a thread of this process (the window's default);
(c) the window with its engine in a child process (`specviz --engine process`).
Each window runs Run until max new tokens inside a real event loop and reports what its
status bar shows at the end (metrics.speed_tracker over the last 64 rounds, as the
summary). Ratios to headless, medians over repeats. Not a test: never part of the test run.

    QT_QPA_PLATFORM=offscreen python benchmarks/window_speedup.py --pair tiny --tokens 800
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

import gui_redraw  # noqa: E402

from specviz.core.engine.speculative import SpeculativeEngine  # noqa: E402
from specviz.core.engine.threads import set_threads  # noqa: E402
from specviz.core.metrics.running import summary  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402
from specviz.core.resources import example_prompts  # noqa: E402
from specviz.core.trace.records import Settings  # noqa: E402
from specviz.core.trace.session import Session  # noqa: E402


def headless(pair, settings: Settings, prompt: str):
    engine = SpeculativeEngine(pair, settings)
    engine.prefill(prompt)
    rounds = list(engine.run())
    s = summary(Session(engine.header, rounds))
    return s["speedup_measured_raw"], s["speedup_ci"], s["speedup_status"], len(rounds)


def window(app, spec: str, settings: Settings, prompt: str, engine=None):
    """What the window's status bar shows at the end of a Run (gui_redraw.run_window)."""
    w = gui_redraw.run_window(app, (spec, spec), settings, prompt, engine)
    sp = w.speed.latest.speedup
    n = len(w.session.rounds)
    gui_redraw.close_window(app, w)
    return sp.value, None if sp.interval is None else list(sp.interval), sp.status, n


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="tiny")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=800)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from PySide6.QtWidgets import QApplication
    from transformers.utils import logging as hf_logging

    from specviz.gui.app import leave_a_core_for_the_window
    from specviz.gui.qtfixes import refguard
    from specviz.gui.session.remote_link import remote_engine_thread

    hf_logging.disable_progress_bar()
    refguard.install()
    app = QApplication.instance() or QApplication([])
    spec = f"builtin:{args.pair}"
    pair = load_pair(spec, spec)
    settings = Settings(k=args.k, seed=1, max_new_tokens=args.tokens)
    prompt = example_prompts()[1]
    runs: dict[str, list] = {"headless": [], "thread": [], "process": []}
    set_threads(None)  # as `specviz run`
    for _ in range(args.repeats):  # interleaved
        runs["headless"].append(headless(pair, settings, prompt))
        leave_a_core_for_the_window()  # as the app: the same count here (cores - 1)
        set_threads(None)
        runs["thread"].append(window(app, spec, settings, prompt))
        runs["process"].append(window(app, spec, settings, prompt, remote_engine_thread()))
    base = statistics.median(r[0] for r in runs["headless"])
    result = {"pair": spec, "k": args.k, "tokens": args.tokens, "runs": runs}
    for mode in ("thread", "process"):
        result[f"{mode}_over_headless"] = statistics.median(r[0] for r in runs[mode]) / base
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for mode, rows in runs.items():
            for value, ci, status, n in rows:
                band = "n/a" if not ci else f"[{ci[0]:.2f}, {ci[1]:.2f}]"
                print(f"{mode:9s} {value:.2f}x {band} {status} ({n} rounds)")
        print(
            f"window in-thread / headless {result['thread_over_headless']:.3f}, "
            f"engine process / headless {result['process_over_headless']:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
