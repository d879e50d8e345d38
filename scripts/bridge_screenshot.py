"""docs/screenshots/bridge.png: a draft with another tokenizer in the window, the built-in
tiny target (8,192 tokens) and the built-in smollm2 pair's draft (49,152) bridged by
strings (--vocab-bridge string), one round selected: under the stream the draft's own
pieces above the target's drafted tokens, the columns where the two cuts differ tinted;
drawn offscreen at 1280x720.

    QT_QPA_PLATFORM=offscreen python scripts/bridge_screenshot.py [--rounds 12] [--select N]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

from scripts.suffix_screenshot import wait  # noqa: E402

# Names the two vocabularies cut apart: smollm2 has " Israelites", tiny " Israel" + "ites".
PROMPT = (
    "Nebuchadnezzar the king of Babylon came against Jerusalem, and besieged it. "
    "And the Philistines"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--select", type=int, default=None, help="round to select (1-based)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots" / "bridge.png"))
    parser.add_argument("--target", default="builtin:tiny")
    parser.add_argument("--draft", default="builtin:smollm2")
    parser.add_argument("--prompt", default=PROMPT)
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from specviz.core.decoding.k_policy import PolicyConfig
    from specviz.core.drafters.registry import DrafterConfig
    from specviz.core.models.pair import LoadOptions
    from specviz.core.trace.rule_numbers import cut_groups
    from specviz.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    drafting = (DrafterConfig("string"), PolicyConfig())
    window = MainWindow((args.target, args.draft), drafting=drafting, autosave=False,
                        load_options=LoadOptions(vocab_bridge="string"))  # fmt: skip
    window.resize(1280, 720)
    window.show()
    wait(app, lambda: window.controller.models is not None, 600)
    window.controls.set_prompt(args.prompt)
    window.controls.set_chat(False, given=True)
    window.controls.temperature_spin.setValue(0.0)
    window.controls.k_spin.setValue(4)
    for _ in range(args.rounds):
        count = len(window.session.rounds) if window.session else 0
        window.actions_.step.trigger()
        wait(app, lambda c=count: window.session is not None and len(window.session.rounds) > c)
        if window.session.finished:
            break
    rounds = window.session.rounds

    def differ(r) -> int:
        groups = cut_groups(r.draft_pieces, r.n_drafted) if r.draft_pieces else []
        return sum(1 for g in groups if (g[1] - g[0], g[3] - g[2]) != (1, 1))

    chosen = (
        args.select - 1 if args.select
        else max(rounds, key=lambda r: (differ(r) > 0, r.n_accepted, differ(r))).index
    )  # fmt: skip
    window.select_round(chosen)
    wait(app, lambda: True, 0.5)
    window.grab().save(args.out)
    r = rounds[chosen]
    drafted = sum(x.n_drafted for x in rounds)
    kept = sum(x.n_accepted for x in rounds)
    emitted = sum(x.n_emitted for x in rounds)
    tokens = [t.text for t in r.tokens[: r.n_drafted]]
    print(f"{args.out}: round {chosen + 1} of {len(rounds)}: {r.n_accepted} of {r.n_drafted} "
          f"kept; pieces {r.draft_pieces['text']} over tokens {tokens}, the cuts differ in "
          f"{differ(r)} places")  # fmt: skip
    print(f"session: {kept} of {drafted} drafts kept, {emitted} tokens in {len(rounds)} passes; "
          f"rounds whose cuts differ: {sum(1 for x in rounds if differ(x))}")  # fmt: skip
    window.close_now()
    return 0


if __name__ == "__main__":
    sys.exit(main())
