"""A Step's full redraw with and without four treatments, interleaved in one window:
fixed axis widths against widths fitted to the labels, a pixmap cache for the axes against
none, no markers on the per-round acceptance past 200 rounds against markers, and curves
downsampled to a point per pixel against five (the last two run late in the session, past
round 400 with --rounds 800), all specviz's defaults. Blocks of 10 rounds alternate; the
first 2 rounds of each block are not counted (the switch itself relays out). Not a test.

    QT_QPA_PLATFORM=offscreen python benchmarks/gui_axes.py --rounds 800
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SPECVIZ_NO_DIALOGS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=120)
    args = parser.parse_args()

    import pyqtgraph as pg
    from PySide6.QtWidgets import QApplication, QGraphicsItem

    from specviz.gui.qtfixes import refguard

    refguard.install()
    app = QApplication.instance() or QApplication([])
    pg.setConfigOptions(antialias=True, background="w", foreground="#222222")
    from gui_redraw import record

    from specviz.core.models.pair import load_pair
    from specviz.gui.distribution.view import MAIN_LABEL_ROOM
    from specviz.gui.main_window import MainWindow
    from specviz.gui.plots.plot_kit import fix_axis_width

    session = record(load_pair("builtin:tiny", "builtin:tiny"), args.rounds, seed=0)
    window = MainWindow(None, autosave=False)
    window.resize(1400, 900)
    window.show()
    app.processEvents()
    window.controller.engine.session_started.emit(session.header)  # as the worker says it
    app.processEvents()
    plots = list(window.plots.plots.values())
    main_axis = window.distribution.main.getPlotItem().getAxis("left")
    views = [*plots, *(w.getPlotItem() for w in (window.distribution.main,
                                                 window.distribution.residual_plot,
                                                 window.distribution.gauge))]  # fmt: skip

    def widths(fixed: bool) -> None:
        for plot in plots:
            axis = plot.getAxis("left")
            fix_axis_width(axis, "00000") if fixed else axis.setWidth(None)
        fix_axis_width(main_axis, MAIN_LABEL_ROOM) if fixed else main_axis.setWidth(None)

    def cache(on: bool) -> None:
        mode = QGraphicsItem.CacheMode
        for view in views:
            for side in ("left", "bottom"):
                view.getAxis(side).setCacheMode(mode.DeviceCoordinateCache if on else mode.NoCache)

    from specviz.gui.plots import round_plots as plots_module

    def markers(on: bool) -> None:  # past SYMBOL_ROUNDS the per-round curve has no markers
        plots_module.SYMBOL_ROUNDS = 200 if on else 10**9

    def pixel(on: bool) -> None:  # curves downsampled to a point per pixel, not five
        for curve in window.plots.curves:
            curve.opts["autoDownsampleFactor"] = 1.0 if on else 5.0

    experiments = {
        "fixed widths": widths,
        "axis pixmap cache": cache,
        "no markers": markers,
        "point per pixel": pixel,
    }
    rounds = iter(session.rounds)
    for name, switch in experiments.items():
        costs: dict[bool, list[float]] = {True: [], False: []}
        for block in range(len(session.rounds) // 10 // len(experiments)):
            on = block % 2 == 0
            switch(on)
            for j in range(10):
                rnd = dataclasses.replace(next(rounds), finish_reason=None)
                start = time.perf_counter()
                window.controller.engine.round_ready.emit(rnd)  # a full redraw, as Step does
                app.processEvents()
                if j >= 2:
                    costs[on].append(1000 * (time.perf_counter() - start))
        switch(True)  # back to specviz's default
        with_, without = statistics.median(costs[True]), statistics.median(costs[False])
        print(f"{name:18s} with {with_:5.1f} ms, without {without:5.1f} ms: "
              f"{without / with_:.2f}x")  # fmt: skip
    window.close_now()
    return 0


if __name__ == "__main__":
    sys.exit(main())
