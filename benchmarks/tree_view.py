"""What drawing a 63-node token tree costs in the window's Tree tab, beside what a Step costs
the window for a chain round. Not a test: never part of the test run.

1. Tree redraw: the tree view (gui/tree/view.py) at its size in a 1280 x 720 window draws
   63-node rounds of the built-in pair (K 6, width 2, budget 63), alternating between two
   different rounds so that every redraw moves and recolours every node, each followed by
   a synchronous repaint of its viewport; median over --repeats redraws.
2. Step redraw (benchmarks/gui_redraw.py's "step" figure): a window fed a chain session
   (K 4) round by round as the worker feeds it, each round followed by processEvents;
   median over rounds 5-15. The same for a tree session (the Tree tab shown, drawing each
   new round's tree): what a Step of a tree session costs against a chain's.

    QT_QPA_PLATFORM=offscreen python benchmarks/tree_view.py
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SPECVIZ_NO_DIALOGS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))  # gui_redraw, beside this file

from gui_redraw import redraw_costs  # noqa: E402

from specviz.core.engine.speculative import SpeculativeEngine  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402
from specviz.core.resources import example_prompts  # noqa: E402
from specviz.core.trace.records import Settings  # noqa: E402
from specviz.core.trace.session import Session  # noqa: E402

TREE = dict(k=6, tree_width=2, tree_budget=63)


def record(pair, settings: Settings, n_rounds: int) -> Session:
    """A session of n_rounds rounds (prompts chained, rounds repeated if it ends early)."""
    engine = SpeculativeEngine(pair, settings)
    session = Session(engine.prefill(example_prompts()[0], calibrate=False))
    while len(session.rounds) < n_rounds and not engine.finished:
        session.append(engine.step())
    base = list(session.rounds)
    while len(session.rounds) < n_rounds:
        rnd = base[len(session.rounds) % len(base)]
        session.rounds.append(
            dataclasses.replace(rnd, index=len(session.rounds), finish_reason=None)
        )
    return session


def tree_redraws(app, session: Session, repeats: int) -> tuple[list[float], int]:
    """ms per redraw of the Tree tab's view (draw + repaint), and the nodes drawn."""
    from specviz.gui.main_window import MainWindow
    from specviz.gui.tree.model import round_tree

    biggest = sorted(session.rounds, key=lambda r: len(r.tree.parent))[-2:]
    trees = [round_tree(rnd) for rnd in biggest]
    window = MainWindow(None, autosave=False)
    window.resize(1280, 720)
    window.show()
    window.controller.engine.session_started.emit(session.header)
    window.controller.add_rounds(session.rounds[:1])  # a tree session: the Tree tab shows
    app.processEvents()
    view = window.tree.panel.view
    costs = []
    for i in range(repeats + 10):
        tree = trees[i % 2]
        start = time.perf_counter()
        view.draw(tree, tree.path[-1] if tree.path else None)
        view.viewport().repaint()
        if i >= 10:  # the first ten warm up
            costs.append(1000 * (time.perf_counter() - start))
    nodes = min(t.n for t in trees)
    window.close_now()
    app.processEvents()
    return costs, nodes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="tiny")
    parser.add_argument("--repeats", type=int, default=400, help="tree redraws timed")
    parser.add_argument("--rounds", type=int, default=40, help="rounds of each session")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from PySide6.QtWidgets import QApplication
    from transformers.utils import logging as hf_logging

    from specviz.gui.qtfixes import refguard

    hf_logging.disable_progress_bar()
    refguard.install()
    app = QApplication.instance() or QApplication([])
    spec = f"builtin:{args.pair}"
    pair = load_pair(spec, spec)
    tree_settings = Settings(seed=0, max_new_tokens=1_000_000, **TREE)
    tree_session = record(pair, tree_settings, args.rounds)
    chain_session = record(pair, Settings(k=4, seed=0, max_new_tokens=1_000_000), args.rounds)
    redraws, nodes = tree_redraws(app, tree_session, args.repeats)
    chain_step = statistics.median(redraw_costs(app, chain_session, "step")[:10])
    tree_step = statistics.median(redraw_costs(app, tree_session, "step")[:10])
    tree_ms = statistics.median(redraws)
    result = {
        "pair": spec,
        "tree_nodes": nodes,
        "tree_redraw_ms_median": round(tree_ms, 3),
        "tree_redraw_ms_p90": round(statistics.quantiles(redraws, n=10)[-1], 3),
        "chain_step_ms_median": round(chain_step, 3),
        "tree_step_ms_median": round(tree_step, 3),
        "tree_redraw_over_chain_step": round(tree_ms / chain_step, 3),
        "tree_step_over_chain_step": round(tree_step / chain_step, 3),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"pair {spec}; a tree of {nodes} drafted nodes (K 6, width 2, budget 63)")
        print(f"  tree view redraw   {tree_ms:7.2f} ms  (median of {len(redraws)}; "
              f"p90 {result['tree_redraw_ms_p90']:.2f})")  # fmt: skip
        print(f"  window Step, chain {chain_step:7.2f} ms  (median, rounds 5-15)")
        print(f"  window Step, tree  {tree_step:7.2f} ms  (median, rounds 5-15, Tree tab shown)")
        print(f"  tree redraw / chain Step = {result['tree_redraw_over_chain_step']:.2f}; "
              f"tree Step / chain Step = {result['tree_step_over_chain_step']:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
