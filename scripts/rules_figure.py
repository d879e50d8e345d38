"""docs/verification.md's figure: each verification rule on the same draws (core.lab.sequence),
one panel per rule: the emitted stream's pairs of consecutive tokens against p x p, with the
drafts kept a round and the pairs test's p-value. Drawn offscreen with pyqtgraph.

    QT_QPA_PLATFORM=offscreen python scripts/rules_figure.py [--rounds 300000]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

# A p and q where every wrong variant shows (on the paper's example one cannot; see the doc).
P, Q, K = (0.4, 0.4, 0.2), (0.05, 0.25, 0.7), 2
TOKENS = "ABC"
SHORT = {
    "token": "Leviathan et al., one at a time",
    "block": "Sun et al., the drafts as a block",
    "typical": "Medusa, LOSSY: no residual",
    "token-block-residual": "WRONG: token test, block residual",
    "block-token-residual": "WRONG: block h, token residual",
}


def pair_shares(rule: str, rounds: int, seed: int) -> np.ndarray:
    """The emitted stream's non-overlapping pairs' shares [V * V] (the test's cells)."""
    from specviz.core.lab import sequence

    p, q = np.asarray(P) / sum(P), np.asarray(Q) / sum(Q)
    draws = sequence.shared_draws(q, K, rounds, seed)
    stream, _ = sequence.emitted_stream(rule, p, q, draws)
    pairs = stream[: len(stream) // 2 * 2].reshape(-1, 2)
    v = len(p)
    return np.bincount(pairs[:, 0] * v + pairs[:, 1], minlength=v * v) / len(pairs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots" / "rules.png"))
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import pyqtgraph as pg
    from pyqtgraph import exporters
    from PySide6.QtWidgets import QApplication

    from specviz.core.lab.sequence import SEQUENCE_RULES, compare

    app = QApplication.instance() or QApplication([])
    pg.setConfigOptions(background="w", foreground="k", antialias=True)
    results = {r.rule: r for r in compare(P, Q, K, args.rounds, args.seed)}
    p = np.asarray(P) / sum(P)
    target = np.outer(p, p).ravel()
    labels = [a + b for a in TOKENS for b in TOKENS]
    view = pg.GraphicsLayoutWidget()
    view.resize(1500, 460)
    for column, rule in enumerate(SEQUENCE_RULES):
        r = results[rule]
        shares = pair_shares(rule, args.rounds, args.seed)
        plot = view.addPlot(row=0, col=column)
        verdict = "follows p" if r.lossless else "MISSES p"
        plot.setTitle(
            f"<b>{rule}</b><br>{SHORT[rule]}<br>"
            f"kept {r.mean_accepted:.3f}/round, p-value {r.p_value:.2g}: {verdict}",
            size="9pt",
        )
        x = np.arange(len(labels))
        plot.addItem(pg.BarGraphItem(x=x - 0.2, height=target, width=0.38, brush="#4c72b0"))
        colour = "#55a868" if r.lossless else "#c44e52"
        plot.addItem(pg.BarGraphItem(x=x + 0.2, height=shares, width=0.38, brush=colour))
        plot.getAxis("bottom").setTicks([list(zip(x, labels, strict=True))])
        plot.setYRange(0, 0.3)
        plot.setMouseEnabled(False, False)
    view.addLabel(
        f"p = {P}, q = {Q}, K = {K}, {args.rounds:,} rounds, the same drafts and uniforms for "
        "every rule. Blue: p x p for each pair of consecutive tokens; green (follows p) / red "
        "(misses p): the emitted stream's pairs.",
        row=1,
        col=0,
        colspan=len(SEQUENCE_RULES),
    )
    view.show()
    app.processEvents()
    exporter = exporters.ImageExporter(view.scene())
    exporter.parameters()["width"] = 1500
    exporter.export(args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
