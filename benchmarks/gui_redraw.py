"""The window's cost per round, early and late in a session, and the engine's speed with the
window open against headless. Not a test: never part of the test run.

1. Redraw per round: a real session of the built-in pair is recorded headless, then fed to
   a MainWindow round by round as the worker would, each followed by processEvents (the
   paint). "step" draws everything each round (what Step does); "run" is the Run path
   (each round's figures into the plots' series; stream, slider and status at most every
   FRAME_MS; plots and bars at most every REFRESH_MS), 20 ms of sleep between rounds as
   the engine's time. Medians over rounds 5-15 and over the last 20 rounds of a long
   session; for "run" also the means over the first and the last 100 rounds, which count
   the rounds that draw a frame or a refresh (the medians mostly do not).
   --phases: where a round's time goes (thread CPU ms per round, by phase: the views'
   Python, each graphics view's paint, the token stream's paint; a Qt event filter and
   wrappers, so the totals run a little slower than without).
2. Engine tokens/s: the same settings headless (SpeculativeEngine.run) and in the window
   (Run until max new tokens, the worker on its thread, autosave on), interleaved,
   medians; both timed from the first round to the last (session start and calibration
   excluded). The window runs as the app runs it (torch one thread short of its default,
   gui.app.leave_a_core_for_the_window: a core for the window's thread) and with torch's
   default threads as before, and asking for the next round after drawing the last one
   (SessionController.prefetch off); headless always with torch's default threads.

    QT_QPA_PLATFORM=offscreen python benchmarks/gui_redraw.py --rounds 2000
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

from specviz.core.engine.speculative import SpeculativeEngine  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402
from specviz.core.resources import example_prompts  # noqa: E402
from specviz.core.trace.records import Settings  # noqa: E402
from specviz.core.trace.session import Session  # noqa: E402


def record(pair, n_rounds: int, seed: int) -> Session:
    """A long live session: prompts chained until n_rounds rounds exist (one header)."""
    engine = SpeculativeEngine(pair, Settings(k=4, seed=seed, max_new_tokens=1_000_000))
    session = Session(engine.prefill(example_prompts()[0], calibrate=True))
    while len(session.rounds) < n_rounds and not engine.finished:
        session.append(engine.step())
    if len(session.rounds) < n_rounds:  # EOS or context end: continue with fresh indices
        base = list(session.rounds)
        while len(session.rounds) < n_rounds:
            rnd = base[len(session.rounds) % len(base)]
            session.rounds.append(
                dataclasses.replace(rnd, index=len(session.rounds), finish_reason=None)
            )
    return session


def redraw_costs(app, session: Session, mode: str, phases: dict | None = None) -> list[float]:
    """Rounds handed to a window's controller as the worker hands them; "step" mode times
    rounds 5-15 and the last 20 (the others arrive in batches, drawn once), "run" mode all.
    phases: filled with thread CPU ms per phase over the last 20 rounds."""
    from specviz.gui.main_window import MainWindow
    from specviz.gui.session.state import State

    window = MainWindow(None, autosave=False)
    window.show()
    app.processEvents()
    probe = None if phases is None else PhaseProbe(window)
    controller = window.controller
    controller.engine.session_started.emit(session.header)  # as the worker says it
    app.processEvents()
    if mode == "run":
        controller.state = State.RUNNING  # the worker is not asked: rounds come from here
    costs = []
    last = len(session.rounds)
    timed = [mode == "run" or 5 <= i < 15 or i >= last - 20 for i in range(last)]
    rounds = [dataclasses.replace(rnd, finish_reason=None) for rnd in session.rounds]
    i = 0
    while i < last:
        if probe is not None and i == last - 20:
            probe.reset()
        if not timed[i]:  # untimed rounds: one batch, drawn once
            j = i
            while j < last and not timed[j]:
                j += 1
            controller.add_rounds(rounds[i:j])
            app.processEvents()
            i = j
            continue
        start = time.perf_counter()
        controller.engine.round_ready.emit(rounds[i])
        app.processEvents()
        costs.append(1000 * (time.perf_counter() - start))
        if mode == "run":
            time.sleep(0.02)  # the engine's time for the next round; throttled timers fire
            start = time.perf_counter()
            app.processEvents()
            costs[-1] += 1000 * (time.perf_counter() - start)
        i += 1
    controller.state = State.PAUSED
    if probe is not None:
        phases.update(probe.per_round(20))
        probe.remove()
    window.close_now()
    app.processEvents()
    return costs


class PhaseProbe:
    """Thread CPU time by phase in one window: wrappers on the views' methods and an event
    filter on each graphics view's viewport and the token stream's (their paints)."""

    def __init__(self, window):
        from PySide6.QtCore import QEvent, QObject

        self.totals: dict[str, float] = {}
        self._undo = []
        methods = {
            "stream.append_rounds": (window.stream, "append_rounds"),
            "plots.add": (window.plots, "add"),
            "plots.redraw": (window.plots, "redraw"),
            "distribution.show_position": (window.distribution, "show_position"),
            "speed.add": (window.speed.__class__, "add"),
            "status": (window.status, "set_figures"),
        }
        for name, (owner, attr) in methods.items():
            self._wrap(name, owner, attr)
        d = window.distribution
        viewports = {
            "paint.plots": window.plots.graphics.viewport(),
            "paint.distribution": d.main.viewport(),
            "paint.residual": d.residual_plot.viewport(),
            "paint.gauge": d.gauge.viewport(),
            "paint.stream": window.stream.view.viewport(),
        }
        names = {id(w): name for name, w in viewports.items()}
        totals = self.totals

        class Filter(QObject):
            def eventFilter(self, obj, event):
                if event.type() != QEvent.Type.Paint:
                    return False
                name = names[id(obj)]
                start = time.thread_time()
                obj.removeEventFilter(self)  # deliver the paint now, timed, then filter again
                QApplication.sendEvent(obj, event)
                obj.installEventFilter(self)
                totals[name] = totals.get(name, 0.0) + time.thread_time() - start
                return True

        from PySide6.QtWidgets import QApplication

        self._filter = Filter()
        self._viewports = list(viewports.values())
        for widget in self._viewports:
            widget.installEventFilter(self._filter)

    def _wrap(self, name: str, owner, attr: str) -> None:
        original = getattr(owner, attr)
        totals = self.totals

        def timed(*args, **kwargs):
            start = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                totals[name] = totals.get(name, 0.0) + time.thread_time() - start

        setattr(owner, attr, timed)
        if isinstance(owner, type):
            self._undo.append(lambda: setattr(owner, attr, original))
        else:
            self._undo.append(lambda: owner.__dict__.pop(attr, None))

    def reset(self) -> None:
        self.totals.clear()

    def per_round(self, rounds: int) -> dict[str, float]:
        return {k: 1000 * v / rounds for k, v in sorted(self.totals.items(), key=lambda kv: -kv[1])}

    def remove(self) -> None:
        for widget in self._viewports:
            widget.removeEventFilter(self._filter)
        for undo in self._undo:
            undo()


def run_window(
    app, specs, settings: Settings, prompt: str, engine=None, prefetch: bool = True,
    before_run=None,
):  # fmt: skip
    """A window (as a user runs it: autosave on) on these settings, Run until the session
    finishes, inside a real event loop (as the app's exec() runs it: a polling loop here
    would take the GIL from the worker thousands of times a second). before_run(window) may
    connect to its signals first. Returns the finished window: the caller closes it
    (close_window). engine: the window's engine thread, else the in-thread worker."""
    from PySide6.QtCore import QEventLoop, QTimer

    from specviz.gui.main_window import MainWindow

    window = MainWindow(specs, engine=engine)
    window.controller.prefetch = prefetch
    loop = QEventLoop()
    window.controller.engine.loaded.connect(lambda *_: loop.quit())
    window.controller.engine.error.connect(
        lambda title, message: (print(title, message), loop.quit())
    )
    loop.exec()  # the models load
    window.controls.prompt_edit.setPlainText(prompt)
    window.controls.k_spin.setValue(settings.k)
    window.controls.max_tokens_spin.setValue(settings.max_new_tokens)
    window.controls.seed_spin.setValue(settings.seed)
    if before_run is not None:
        before_run(window)
    done = QTimer()
    done.timeout.connect(lambda: loop.quit() if window.state == "finished" else None)
    done.start(50)
    window.show()
    window.toggle_run()
    loop.exec()
    done.stop()
    return window


def close_window(app, window) -> None:
    window.close_now()
    app.processEvents()


def window_tokens_per_s(
    app, specs, settings: Settings, prompt: str, prefetch: bool = True, engine=None,
    at_views: bool = False,
) -> float:  # fmt: skip
    """run_window's tokens/s, timed from the first round's arrival to the last one's
    (at_views: from the first round handed to the views to the last, as
    gui_engine_process.py times it, where rounds may come a frame's worth at a time)."""
    arrivals: list[tuple[float, int]] = []  # (time, tokens) per arrival

    def record(window) -> None:
        if at_views:
            window.controller.rounds_added.connect(
                lambda added: arrivals.append(
                    (time.perf_counter(), sum(r.n_emitted for r, _ in added))
                )
            )
        else:
            window.controller.engine.round_ready.connect(
                lambda rnd: arrivals.append((time.perf_counter(), rnd.n_emitted))
            )

    window = run_window(app, specs, settings, prompt, engine, prefetch, before_run=record)
    (start, _), (end, _) = arrivals[0], arrivals[-1]
    tokens = sum(n for _, n in arrivals[1:])
    close_window(app, window)
    return tokens / (end - start)


def headless_tokens_per_s(pair, settings: Settings, prompt: str) -> float:
    engine = SpeculativeEngine(pair, settings)
    engine.prefill(prompt)
    first = engine.step().n_emitted  # timed from the first round on, as in the window
    start = time.perf_counter()
    for _ in engine.run():
        pass
    return (engine.n_generated - first) / (time.perf_counter() - start)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="tiny")
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3, help="engine speed: runs each")
    parser.add_argument("--max-new-tokens", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--phases", action="store_true", help="CPU ms per round by phase")
    parser.add_argument(
        "--as-app",
        action="store_true",
        help="pyqtgraph's options as the app sets them (antialiased, white): Step ~1.07x",
    )
    parser.add_argument(
        "--skip-engine", action="store_true", help="the redraw figures only (no tokens/s)"
    )
    args = parser.parse_args(argv)
    from PySide6.QtWidgets import QApplication
    from transformers.utils import logging as hf_logging

    from specviz.gui.qtfixes import refguard

    hf_logging.disable_progress_bar()
    refguard.install()
    if args.as_app:
        from specviz.gui.app import _application

        app = _application()
    else:  # as measured since 2026-11-29 (pyqtgraph's defaults: no antialiasing)
        app = QApplication.instance() or QApplication([])
    result_look = {"as_app": args.as_app}
    spec = f"builtin:{args.pair}"
    pair = load_pair(spec, spec)
    session = record(pair, args.rounds, seed=0)
    result: dict = {"pair": spec, "rounds": args.rounds, **result_look}
    for mode in ("step", "run"):
        phases = {} if args.phases else None
        costs = redraw_costs(app, session, mode, phases)
        early = costs[5:15] if mode == "run" else costs[:10]
        result[f"{mode}_ms_round_5_15"] = statistics.median(early)
        result[f"{mode}_ms_last_20"] = statistics.median(costs[-20:])
        if mode == "run":
            result["run_ms_mean_all"] = statistics.fmean(costs)
            result["run_ms_mean_first_100"] = statistics.fmean(costs[:100])
            result["run_ms_mean_last_100"] = statistics.fmean(costs[-100:])
        if phases is not None:
            result[f"{mode}_phases_cpu_ms_last_20"] = phases
    if args.skip_engine:
        return report(result, args.json)
    settings = Settings(k=4, seed=1, max_new_tokens=args.max_new_tokens)
    prompt = example_prompts()[1]
    import torch

    from specviz.gui.app import leave_a_core_for_the_window

    default_threads = torch.get_num_threads()

    def as_the_app(**kw) -> float:
        leave_a_core_for_the_window()
        try:
            return window_tokens_per_s(app, (spec, spec), settings, prompt, **kw)
        finally:
            torch.set_num_threads(default_threads)

    headless, windowed, all_threads, after = [], [], [], []
    for _ in range(args.repeats):  # interleaved
        headless.append(headless_tokens_per_s(pair, settings, prompt))
        windowed.append(as_the_app())
        all_threads.append(window_tokens_per_s(app, (spec, spec), settings, prompt))
        after.append(as_the_app(prefetch=False))
    result["headless_tokens_per_s"] = statistics.median(headless)
    result["window_tokens_per_s"] = statistics.median(windowed)
    result["window_over_headless"] = result["window_tokens_per_s"] / result["headless_tokens_per_s"]
    result["torch_threads"] = default_threads
    # the window with torch's default threads (as before 2026-12-01)
    result["window_all_threads_tokens_per_s"] = statistics.median(all_threads)
    result["all_threads_over_headless"] = (
        result["window_all_threads_tokens_per_s"] / result["headless_tokens_per_s"]
    )
    # the next round asked for only after the last one is drawn
    result["window_no_prefetch_tokens_per_s"] = statistics.median(after)
    result["prefetch_gain"] = result["window_tokens_per_s"] / statistics.median(after)
    return report(result, args.json)


def report(result: dict, as_json: bool) -> int:
    result["load_average"] = os.getloadavg()[0]
    if as_json:
        print(json.dumps(result, indent=1))
        return 0
    for key, value in result.items():
        if isinstance(value, dict):
            print(key)
            for name, ms in value.items():
                print(f"  {name:28s} {ms:.2f}")
        else:
            print(f"{key:28s} {value:.2f}" if isinstance(value, float) else f"{key:28s} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
