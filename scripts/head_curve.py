"""Held-out simulated #MAT against trained tokens, on a log scale, for one or more
`specviz train-head` runs (their training.json curves) measured on the same held-out set: a
table on stdout and, with --out, a figure drawn offscreen with pyqtgraph.

A warm start's curve counts from zero; `LABEL=PATH+N` adds the N trained tokens its starting
head had already seen, so that runs continuing one another line up on one axis.

    python scripts/head_curve.py "self-written=work-tmp/train/self/training.json" \\
        "warm, 8,192=work-tmp/train/warm8k/training.json+2011136" --out curve.png
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

MAX_BYTES = 16 << 20  # a training.json is kilobytes
# matplotlib's tab10
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")  # fmt: skip


def read_run(spec: str) -> tuple[str, list[tuple[int, float, float]]]:
    """(label, [(trained tokens, #MAT K 3, #MAT K 4)]) of 'LABEL=PATH[+N]'."""
    label, sep, rest = spec.partition("=")
    if not sep or not label or not rest:
        raise SystemExit(f"head_curve: {spec!r}: expected LABEL=PATH[+N]")
    path, _, offset = rest.rpartition("+") if "+" in rest else (rest, "", "0")
    if not offset.isdigit():
        raise SystemExit(f"head_curve: {spec!r}: +N must be a whole number of tokens")
    p = Path(path)
    if not p.is_file() or p.stat().st_size > MAX_BYTES:
        raise SystemExit(f"head_curve: {path}: not a training.json of at most {MAX_BYTES:,} B")
    try:
        report = json.loads(p.read_text(encoding="utf-8"))
        points = [(int(c["trained"]) + int(offset), float(c["mat_k3"]), float(c["mat_k4"]))
                  for c in report["curve"]]  # fmt: skip
    except (ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"head_curve: {path}: no curve of train-head's ({e})") from None
    return label, sorted(points)


def draw(runs: list[tuple[str, list]], out: Path, title: str) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import numpy as np
    import pyqtgraph as pg
    from pyqtgraph import exporters
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    pg.setConfigOptions(background="w", foreground="k", antialias=True)
    plot = pg.PlotWidget()
    plot.resize(900, 520)
    plot.show()  # offscreen: lays the plot out at its size before the export
    item = plot.getPlotItem()
    item.setTitle(title)
    item.setLabel("bottom", "trained tokens (positions a loss falls on)")
    item.setLabel("left", "held-out simulated #MAT, K 4")
    item.showGrid(x=True, y=True, alpha=0.25)
    item.setLogMode(x=True, y=False)
    decades = [(e, f"{10**e:,}".replace(",000,000", "M").replace(",000", "k")) for e in range(3, 9)]
    item.getAxis("bottom").setTicks([decades, []])  # log mode: a tick at each power of ten
    item.setXRange(4, 7.3, padding=0)  # 10k .. 20M: the 10M the issue asks for stays in view
    item.addLegend(offset=(10, 10))
    for i, (label, points) in enumerate(runs):
        points = [pt for pt in points if pt[0] > 0]  # a log axis has no 0
        x = np.array([pt[0] for pt in points], dtype=float)
        y = np.array([pt[2] for pt in points])
        colour = COLOURS[i % len(COLOURS)]
        item.plot(x, y, pen=pg.mkPen(colour, width=2), symbol="o", symbolSize=6,
                  symbolBrush=colour, symbolPen=colour, name=label)  # fmt: skip
    app.processEvents()
    exporter = exporters.ImageExporter(item)
    out.parent.mkdir(parents=True, exist_ok=True)
    exporter.export(str(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="LABEL=PATH[+N]")
    parser.add_argument("--out", type=Path, help="a PNG to draw the curves in")
    parser.add_argument("--title", default="EAGLE-3 head on builtin:smollm2, held-out chats")
    args = parser.parse_args(argv)
    runs = [read_run(spec) for spec in args.runs]
    print(f"{'run':28s} {'trained':>11s} {'#MAT K 3':>9s} {'#MAT K 4':>9s}")
    for label, points in runs:
        for trained, k3, k4 in points:
            print(f"{label[:28]:28s} {trained:11,d} {k3:9.3f} {k4:9.3f}")
    if args.out:
        draw(runs, args.out, args.title)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
