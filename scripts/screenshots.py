"""Retake docs/screenshots/ through the app's real entry: `specviz ARGS` as a user types it
(its QApplication and palette, its default child-process engine and `--dtype auto`), the
window at 1280x720, a few rounds stepped or run, one round or position selected. Beside
each NAME.png a NAME.txt says what the picture is of: the command, the machine (CPU model,
its bf16 / AMX units), the dtype the session ran in, the engine, and the figures on screen.

    QT_QPA_PLATFORM=offscreen python scripts/screenshots.py [NAME ...] [--list]

Each picture is its own process (one window, one engine). Nothing is downloaded: the
built-in pairs only. `half-precision-1280x720` replays a greedy bf16 trace whose text parts
from the target alone's, given as $SPECVIZ_SHOT_TRACE (on a 2-core EPYC without bf16 units
four chat questions in bf16 kept the target's text, so that picture is still 2026-12-04's).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
SIZE = (1280, 720)

CHAT = "Explain why the sky is blue in simple terms."
SUFFIX = (
    "Document: The king said unto the people, Go ye every man unto his city. And the people "
    "answered, We will go every man unto his city.\n\nSummary, quoting it: The king said, "
    '"Go ye every man unto'
)
BRIDGE = (
    "Nebuchadnezzar the king of Babylon came against Jerusalem, and besieged it. "
    "And the Philistines"
)


def most_accepted(rounds) -> int:
    return max(rounds, key=lambda r: (r.n_accepted, -r.index)).index


def best_match(rounds) -> int:
    matched = [r for r in rounds if r.matched] or rounds
    return max(matched, key=lambda r: (r.n_accepted, r.matched.length if r.matched else 0)).index


def greedy_parting(rounds) -> int:
    """The round where a half-precision session's text leaves the target alone's."""
    return next((r.index for r in rounds if r.greedy_diff), len(rounds) - 1)


def widest_tree(rounds) -> int:
    return max(rounds, key=lambda r: (r.tree is not None, r.n_accepted, r.n_drafted)).index


@dataclass(frozen=True)
class Shot:
    """One picture: the command line, how many rounds, which round to select (a function of
    the rounds, or a 1-based (round, position)), Run instead of Step."""

    args: tuple[str, ...]
    rounds: int = 8
    select: Callable | tuple[int, int] = most_accepted
    run: bool = False  # F5 and wait, instead of F10 per round
    what: str = ""
    env: dict = field(default_factory=dict)
    panel: Callable | None = None  # (app, window) -> the widget to grab instead of the window


def lab_panel(app, window):
    """Tools > Losslessness lab on the seeds' 4-token example, its Monte Carlo run to the end."""
    window.open_lab()
    lab = window.lab.lab
    lab.showNormal()
    lab.resize(*SIZE)
    settle(app)
    lab.monte_carlo.run()
    wait(app, lambda: not lab.monte_carlo.running, 300)
    return lab


def tune_panel(app, window):
    """Tools > Tune K: the advisor from the session's rounds (no sweep)."""
    window.open_tune()
    panel = window.tune.panel
    panel.resize(*SIZE)
    return panel


def bench_panel(app, window):
    """Tools > Bench results on the bench this script's caller ran ($SPECVIZ_BENCH_JSON)."""
    view = window.bench.open(os.environ["SPECVIZ_BENCH_JSON"])
    view.resize(*SIZE)
    return view


def metrics_panel(app, window):
    """Tools > Engine metrics on the shipped vLLM /metrics example whose acceptance collapses."""
    path = ROOT / "resources" / "examples" / "engine-metrics" / "vllm_metrics_collapse.txt"
    view = window.engine_metrics.open(str(path))
    view.resize(*SIZE)
    return view


def shifted_head() -> str:
    """A copy of builtin:smollm2's head with every aux layer id moved up by one (in /tmp):
    the load-time probe's misfit warning shows above the stream."""
    import shutil

    src = ROOT / "resources" / "models" / "smollm2" / "eagle3"
    dst = Path("/tmp/specviz-shot-shifted-head")
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    config["eagle_aux_hidden_state_layer_ids"] = [
        i + 1 for i in config["eagle_aux_hidden_state_layer_ids"]
    ]
    (dst / "config.json").write_text(json.dumps(config, indent=1))
    return str(dst)


SHOTS = {
    "main": Shot(("--k", "4", "--temperature", "1", "--seed", "1"), rounds=5, select=(3, 3),
                 what="the tiny pair, every fate, a position's accept test"),
    "eagle3": Shot(("--pair", "smollm2", "--drafter", "eagle3", "--k", "4", "--temperature", "0",
                    "--prompt", CHAT), rounds=40,
                   what="builtin:smollm2 chatting with its EAGLE-3 head (the README's hero)"),
    "running-1280x720": Shot(("--k", "4", "--temperature", "1"), rounds=60, run=True,
                             what="the tiny pair after Run"),
    "tree": Shot(("--tree-width", "2", "--tree-budget", "16", "--k", "4", "--temperature", "1"),
                 rounds=6, select=widest_tree, what="a token tree on the tiny pair"),
    "suffix": Shot(("--drafter", "suffix", "--k", "8", "--temperature", "0", "--prompt", SUFFIX),
                   rounds=14, select=best_match, what="suffix decoding's match",
                   env={"SPECVIZ_CACHE": "{tmp}"}),
    "lookup": Shot(("--drafter", "lookup", "--k", "4", "--temperature", "0", "--prompt", SUFFIX),
                   rounds=10, what="prompt lookup copying from the prompt"),
    "bridge": Shot(("--target", "builtin:tiny", "--draft", "builtin:smollm2", "--vocab-bridge",
                    "string", "--k", "4", "--temperature", "0", "--no-chat", "--prompt", BRIDGE),
                   rounds=12, what="a draft with another tokenizer, bridged by strings"),
    "lab-1280x720": Shot((), rounds=1, panel=lab_panel,
                         what="the losslessness lab: the seeds' example, 200,000 draws"),
    "tune-1280x720": Shot(("--k", "4", "--temperature", "1"), rounds=40, run=True,
                          panel=tune_panel, what="Tune K's advisor after a session"),
    "doctor-view": Shot(("--k", "4", "--temperature", "0"), rounds=20, panel=metrics_panel,
                        what="Engine metrics: a vLLM /metrics page beside the session"),
    "eagle3-misfit": Shot(("--pair", "smollm2", "--drafter", "eagle3", "--head", "{head}", "--k",
                           "4", "--temperature", "0", "--prompt", CHAT), rounds=6,
                          what="a head on the wrong layers: the load-time warning"),
    "half-precision-1280x720": Shot(("{trace}",), rounds=0, select=greedy_parting,
                                    what="a greedy bf16 session replayed: where its text parts"),
    "bench": Shot((), rounds=1, panel=bench_panel,
                  what="Bench results: a `specviz bench --json` file by category"),
}  # fmt: skip


def machine() -> dict:
    """The CPU by its model name and bf16 units, the cores."""
    flags, cpu = set(), "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name") and ":" in line:
                cpu = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and ":" in line:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    units = [f for f in ("avx512_bf16", "amx_bf16") if f in flags]
    return {"cpu": cpu, "cores": os.cpu_count(), "bf16_units": units or ["none"]}


def wait(app, done: Callable[[], bool], seconds: float = 300.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        if done():
            return
        time.sleep(0.02)
    raise TimeoutError("the window did not get there")


def settle(app, seconds: float = 0.6) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.02)


def drive(app, name: str, shot: Shot) -> dict:
    """On the GUI thread, once the app's window is up: step or run, select, grab."""
    from PySide6.QtWidgets import QApplication

    from specviz.gui.main_window import MainWindow

    window = next(w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow))
    window.showNormal()
    window.resize(*SIZE)
    c = window.controller
    wait(app, lambda: c.models is not None or c.state.value in ("error", "replay"), 900)
    replay = c.state.value == "replay"
    if c.models is None and not replay:
        raise RuntimeError(f"{name}: the models did not load")

    def count() -> int:
        return len(c.session.rounds) if c.session else 0

    if shot.run:
        window.toggle_run()
        wait(app, lambda: count() >= shot.rounds or c.state.value == "finished", 900)
        if c.state.value == "running":
            window.toggle_run()
        wait(app, lambda: c.state.value != "running", 60)
    else:
        for _ in range(shot.rounds):
            before = count()
            window.step()
            wait(app, lambda b=before: count() > b or c.state.value in ("finished", "error"))
            if c.state.value in ("finished", "error"):
                break
    rounds = c.session.rounds
    if callable(shot.select):
        chosen = shot.select(rounds)
        window.select_round(chosen)
        position = None
    else:
        chosen, position = shot.select[0] - 1, shot.select[1] - 1
        window.select_position(chosen, position)
    settle(app)
    shown = window if shot.panel is None else shot.panel(app, window)
    settle(app, 1.0)
    shown.grab().save(str(OUT / f"{name}.png"))
    header = c.session.header
    r = rounds[chosen]
    drafted = sum(x.n_drafted for x in rounds)
    accepted = sum(x.n_accepted for x in rounds)
    emitted = sum(x.n_emitted for x in rounds)
    return {
        "picture": f"{name}.png",
        "what": shot.what,
        "command": "specviz " + " ".join(_quoted(a) for a in shot.args),
        "taken": date.today().isoformat(),
        "size": f"{SIZE[0]}x{SIZE[1]}",
        "machine": machine(),
        "dtype": header.target.dtype,
        "dtype_choice": (header.dtype_choice or {}).get("why"),
        "engine": "none (a replay)" if replay else "child process (the default)",
        "rounds": len(rounds),
        "selected": {"round": chosen + 1, "position": None if position is None else position + 1,
                     "drafted": r.n_drafted, "accepted": r.n_accepted},
        "session": {"drafts_accepted": f"{accepted} of {drafted} drafted",
                    "tokens_per_pass": round(emitted / max(1, len(rounds)), 2)},
        "status_bar": window.status.currentMessage() or _status_text(window),
    }  # fmt: skip


def _status_text(window) -> str:
    import re

    from PySide6.QtWidgets import QLabel

    texts = (w.text() for w in window.statusBar().findChildren(QLabel) if w.isVisible())
    return " | ".join(re.sub(r"<[^>]+>", "", t) for t in texts if t)


def _quoted(arg: str) -> str:
    return json.dumps(arg) if (" " in arg or "\n" in arg or not arg) else arg


def take(name: str) -> int:
    """In this process: the app started as `specviz ARGS`, driven to the picture."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["SPECVIZ_NO_DIALOGS"] = "1"
    sys.path.insert(0, str(ROOT))
    from PySide6.QtCore import QTimer

    from specviz.cli.main import main
    from specviz.gui.app import _application

    shot = SHOTS[name]
    if "{trace}" in shot.args:  # a bf16 trace whose greedy text parts ($SPECVIZ_SHOT_TRACE)
        shot = replace(shot, args=(os.environ["SPECVIZ_SHOT_TRACE"],))
    if "{head}" in shot.args:
        shot = replace(shot, args=tuple(shifted_head() if a == "{head}" else a for a in shot.args))
    app = _application()
    facts: dict = {}

    def go() -> None:
        from specviz.gui.main_window import MainWindow

        try:
            facts.update(drive(app, name, shot))
        finally:  # the panels first (a window of their own keeps the app running), then it
            for w in app.topLevelWidgets():
                if not isinstance(w, MainWindow) and w.isVisible():
                    w.close()
            for w in app.topLevelWidgets():
                if isinstance(w, MainWindow):
                    w.close_now()

    QTimer.singleShot(0, go)
    code = main(list(shot.args))
    if not facts:
        print(f"{name}: no picture (exit {code})", file=sys.stderr)
        return 1
    text = "\n".join(f"{k}: {json.dumps(v) if not isinstance(v, str) else v}"
                     for k, v in facts.items())  # fmt: skip
    (OUT / f"{name}.txt").write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", help=f"pictures to take (default all: {', '.join(SHOTS)})"
    )
    parser.add_argument("--list", action="store_true", help="list the pictures and exit")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # in a child process: take this one
    args = parser.parse_args()
    if args.list:
        for name, shot in SHOTS.items():
            print(f"{name}: {shot.what}")
        return 0
    if args.one:
        return take(args.one)
    failed = 0
    for name in args.names or SHOTS:
        if name not in SHOTS:
            parser.error(f"unknown picture {name!r}")
        env = {**os.environ, **{k: v.format(tmp=f"/tmp/specviz-shot-{name}")
                                for k, v in SHOTS[name].env.items()}}  # fmt: skip
        failed += subprocess.run([sys.executable, __file__, "--one", name], env=env).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
