"""docs/screenshots/suffix.png: a suffix-decoding session on the built-in tiny pair (target
alone), one round selected: the context's last tokens it matched in blue, the round's line
saying how long the match was and how often it was seen, drawn offscreen at 1280x720.

    QT_QPA_PLATFORM=offscreen python scripts/suffix_screenshot.py [--rounds 14] [--select 9]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

PROMPT = (
    "Document: The king said unto the people, Go ye every man unto his city. And the people "
    "answered, We will go every man unto his city.\n\nSummary, quoting it: The king said, "
    '"Go ye every man unto'
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=14)
    parser.add_argument("--select", type=int, default=None, help="round to select (1-based)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots" / "suffix.png"))
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ.setdefault("SPECVIZ_CACHE", tempfile.mkdtemp())  # no earlier outputs
    from PySide6.QtWidgets import QApplication

    from specviz.core.decoding.k_policy import PolicyConfig
    from specviz.core.drafters.registry import DrafterConfig
    from specviz.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    drafting = (DrafterConfig("suffix"), PolicyConfig())
    window = MainWindow(("builtin:tiny", ""), drafting=drafting, autosave=False)
    window.resize(1280, 720)
    window.show()
    wait(app, lambda: window.controller.models is not None)
    window.controls.set_prompt(PROMPT)
    window.controls.temperature_spin.setValue(0.0)
    window.controls.k_spin.setValue(8)
    for _ in range(args.rounds):
        count = len(window.session.rounds) if window.session else 0
        window.actions_.step.trigger()
        wait(app, lambda c=count: window.session is not None and len(window.session.rounds) > c)
    rounds = window.session.rounds
    chosen = (
        args.select - 1
        if args.select
        else max(  # the most accepted, then the longest
            (r for r in rounds if r.matched), key=lambda r: (r.n_accepted, r.matched["length"])
        ).index
    )
    window.select_round(chosen)
    wait(app, lambda: True, 0.5)
    window.grab().save(args.out)
    print(f"{args.out}: round {chosen + 1}, matched {rounds[chosen].matched}")
    window.close_now()
    return 0


def wait(app, done, seconds: float = 120.0) -> None:
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        if done() and seconds > 1:
            return
        time.sleep(0.02)
    if seconds > 1:
        raise TimeoutError("the window did not get there")


if __name__ == "__main__":
    sys.exit(main())
