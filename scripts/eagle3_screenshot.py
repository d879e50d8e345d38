"""docs/screenshots/eagle3.png: builtin:smollm2 chatting with its own EAGLE-3 head (the
drafter reads the target's hidden states), one round selected: the head's drafts, their
fates and, for the selected position, the head's q beside the target's p; drawn offscreen
at 1280x720.

    QT_QPA_PLATFORM=offscreen python scripts/eagle3_screenshot.py [--rounds 10] [--select N]
        [--head DIR --out F]   (another head: its load-time warnings show above the stream)
        [--dtype float32|bfloat16|auto]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

from scripts.suffix_screenshot import wait  # noqa: E402

PROMPT = "Explain why the sky is blue in simple terms."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--select", type=int, default=None, help="round to select (1-based)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots" / "eagle3.png"))
    parser.add_argument("--head", default=None, help="a head folder (default: the pair's own)")
    parser.add_argument("--dtype", default="float32", help="float32 (default: the README's "
                        "picture), bfloat16, or auto (what --pair smollm2 picks)")  # fmt: skip
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from specviz.core.decoding.k_policy import PolicyConfig
    from specviz.core.drafters.registry import DrafterConfig
    from specviz.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    drafting = (DrafterConfig("eagle3", head=args.head), PolicyConfig())
    window = MainWindow(("builtin:smollm2", ""), dtype=args.dtype, drafting=drafting,
                        autosave=False)  # fmt: skip
    window.resize(1280, 720)
    window.show()
    wait(app, lambda: window.controller.models is not None, 600)
    window.controls.set_prompt(PROMPT)
    window.controls.temperature_spin.setValue(0.0)
    window.controls.k_spin.setValue(4)
    for _ in range(args.rounds):
        count = len(window.session.rounds) if window.session else 0
        window.actions_.step.trigger()
        wait(app, lambda c=count: window.session is not None and len(window.session.rounds) > c)
        if window.session.finished:
            break
    rounds = window.session.rounds
    chosen = args.select - 1 if args.select else max(rounds, key=lambda r: r.n_accepted).index
    window.select_round(chosen)
    wait(app, lambda: True, 0.5)
    window.grab().save(args.out)
    r = rounds[chosen]
    print(f"{args.out}: round {chosen + 1}: {r.n_accepted} of {r.n_drafted} kept")
    window.close_now()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
