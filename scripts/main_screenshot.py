"""docs/screenshots/main.png, the README's picture: the window on the built-in default
pair after five rounds (K 4, T 1, seed 1), round 3's third position selected; an offscreen
grab at 1600x1000.

    QT_QPA_PLATFORM=offscreen python scripts/main_screenshot.py [--round 3 --position 3]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

from scripts.suffix_screenshot import wait  # noqa: E402

PROMPT = "In the beginning God created the heaven and the earth. And the earth was"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--round", type=int, default=3, help="round to select (1-based)")
    parser.add_argument("--position", type=int, default=3, help="its position (1-based)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots" / "main.png"))
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from specviz.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    window = MainWindow(("builtin:tiny", "builtin:tiny"), autosave=False)
    window.resize(1600, 1000)
    window.show()
    wait(app, lambda: window.controller.models is not None)
    window.controls.set_prompt(PROMPT)
    window.controls.k_spin.setValue(4)
    window.controls.temperature_spin.setValue(1.0)
    for _ in range(args.rounds):
        count = len(window.session.rounds) if window.session else 0
        window.actions_.step.trigger()
        wait(app, lambda c=count: window.session is not None and len(window.session.rounds) > c)
    window.select_position(args.round - 1, args.position - 1)
    wait(app, lambda: True, 0.5)
    window.grab().save(args.out)
    rnd = window.session.rounds[args.round - 1]
    token = rnd.tokens[args.position - 1]
    print(f"{args.out}: round {args.round}, position {args.position}: {token.text!r} "
          f"{token.status} p={token.p} q={token.q} u={token.u}")  # fmt: skip
    window.close_now()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
