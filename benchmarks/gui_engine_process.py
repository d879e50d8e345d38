"""The window's tokens/s with its engine in a child process (`specviz --engine process`)
against the in-thread worker (`--engine thread`, the default) and the headless engine, on
the same pair, prompt, settings and seed, interleaved (headless, headless_1, thread,
process, headless, ...), medians, as ratios to headless (issue 16's goal: process >= 0.90).

headless: SpeculativeEngine.run in this process with torch's threads (one per core), as
`specviz run`; headless_1: the same with the child engine's thread count (one per core but
one: spawn.engine_threads()), for reference. Each window runs Run until max new tokens
inside a real event loop, autosave on, timed from the first round reaching the views to the
last one (model load, session start and calibration excluded), the headless engine from its
first round to its last. The child engine is `specviz serve --port 0` on 127.0.0.1, a fresh
one per window. `--frame-ms` sets the window's frame (gui.session.worker.FRAME_S): 0 hands every
round over on its own, as before. Not a test: never part of the test run.

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


import gui_redraw  # noqa: E402
import torch  # noqa: E402
from gui_redraw import headless_tokens_per_s  # noqa: E402

from specviz.core.models.pair import load_pair  # noqa: E402
from specviz.core.resources import example_prompts  # noqa: E402
from specviz.core.trace.records import Settings  # noqa: E402

MODES = ("headless", "headless_1", "thread", "process")
# --variants: the window's engine process as it was (torch's threads, every round drawn on
# its own) and with one of the two changes each, to see what each is worth
VARIANTS = {
    "process_all_threads": {"child_threads": os.cpu_count()},
    "process_no_frame": {"frame_s": 0.0},
    "process_before": {"child_threads": os.cpu_count(), "frame_s": 0.0},
}


def window_tokens_per_s(app, specs, settings: Settings, prompt: str, engine=None) -> float:
    """Run in a window until the session finishes, in a real event loop; tokens/s from the
    first round handed to the views to the last (rounds come one by one or a frame's worth
    at a time: what the user sees)."""
    return gui_redraw.window_tokens_per_s(app, specs, settings, prompt, engine=engine,
                                          at_views=True)  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="tiny", help="a built-in pair (builtin:NAME)")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5, help="runs of each mode")
    parser.add_argument("--frame-ms", type=float, help="the window's frame (default FRAME_S)")
    parser.add_argument("--child-threads", type=int, help="default: spawn.engine_threads()")
    parser.add_argument(
        "--variants", action="store_true", help="also: " + ", ".join(VARIANTS) + " (see above)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from PySide6.QtWidgets import QApplication
    from transformers.utils import logging as hf_logging

    from specviz.gui.qtfixes import refguard
    from specviz.gui.session import remote_link as remote_worker
    from specviz.gui.session import worker as engine_worker
    from specviz.gui.session.remote_link import remote_engine_thread

    if args.frame_ms is not None:
        engine_worker.FRAME_S = args.frame_ms / 1000
    if args.child_threads is not None:
        remote_worker.engine_threads = lambda: args.child_threads
    child_threads = remote_worker.engine_threads()  # what a window's engine process gets

    hf_logging.disable_progress_bar()
    refguard.install()
    app = QApplication.instance() or QApplication([])
    spec = f"builtin:{args.pair}"
    pair = load_pair(spec, spec)
    settings = Settings(k=args.k, seed=1, max_new_tokens=args.max_new_tokens)
    prompt = example_prompts()[1]
    modes = MODES + (tuple(VARIANTS) if args.variants else ())
    runs: dict[str, list[float]] = {mode: [] for mode in modes}
    threads = torch.get_num_threads()
    for _ in range(args.repeats):  # interleaved
        runs["headless"].append(headless_tokens_per_s(pair, settings, prompt))
        torch.set_num_threads(child_threads)
        runs["headless_1"].append(headless_tokens_per_s(pair, settings, prompt))
        torch.set_num_threads(threads)
        runs["thread"].append(window_tokens_per_s(app, (spec, spec), settings, prompt))
        runs["process"].append(
            window_tokens_per_s(app, (spec, spec), settings, prompt, engine=remote_engine_thread())
        )
        for mode in modes[len(MODES) :]:
            engine = remote_engine_thread()
            for name, value in VARIANTS[mode].items():  # child_threads: the link's
                setattr(engine.link if name == "child_threads" else engine.worker, name, value)
            runs[mode].append(window_tokens_per_s(app, (spec, spec), settings, prompt, engine))
    result: dict = {"pair": spec, "k": args.k, "max_new_tokens": args.max_new_tokens}
    result["torch_threads"], result["child_threads"] = threads, child_threads
    result["frame_ms"] = 1000 * engine_worker.FRAME_S
    for mode in modes:
        result[f"{mode}_tokens_per_s"] = statistics.median(runs[mode])
    headless = result["headless_tokens_per_s"]
    result["thread_over_headless"] = result["thread_tokens_per_s"] / headless
    result["process_over_headless"] = result["process_tokens_per_s"] / headless
    result["process_over_headless_1"] = (
        result["process_tokens_per_s"] / result["headless_1_tokens_per_s"]
    )
    result["headless_1_over_headless"] = result["headless_1_tokens_per_s"] / headless
    for mode in modes[len(MODES) :]:
        result[f"{mode}_over_headless"] = result[f"{mode}_tokens_per_s"] / headless
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
