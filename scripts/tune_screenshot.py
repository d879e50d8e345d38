"""The README's screenshot of the Tune panel: a real session's advisor and a small sweep on
the built-in tiny pair, drawn offscreen and saved as docs/screenshots/tune.png.

    QT_QPA_PLATFORM=offscreen python scripts/tune_screenshot.py [--k 1-8] [--limit 5]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", default="1-8")
    parser.add_argument("--limit", type=int, default=5, help="prompts (one per category)")
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots" / "tune.png"))
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import torch
    from PySide6.QtWidgets import QApplication

    from specviz.cli.tune import parse_ks
    from specviz.core.engine.speculative import SpeculativeEngine
    from specviz.core.models.pair import load_pair
    from specviz.core.trace.records import Settings
    from specviz.core.tune.promptsets import load_prompt_set
    from specviz.gui.tune.panel import TunePanel

    torch.set_num_threads(1)
    app = QApplication.instance() or QApplication([])
    pair = load_pair("builtin:tiny", "builtin:tiny")
    engine = SpeculativeEngine(pair, Settings(k=4, max_new_tokens=160, seed=1), trace=False)
    engine.prefill(load_prompt_set()[0].text)
    rounds = list(engine.run())
    import threading
    import time

    from specviz.core.local.engine import LocalEngine

    def run_job(job):  # as the window's engine worker runs a sweep: on its own thread
        threading.Thread(target=job, args=(LocalEngine(pair),), daemon=True).start()

    panel = TunePanel(run_job)
    panel.resize(900, 820)
    panel.add_rounds(rounds)
    prompts = load_prompt_set()
    # One prompt per category, written to a temporary JSONL the panel reads.
    seen, chosen = set(), []
    for p in prompts:
        if p.category not in seen:
            seen.add(p.category)
            chosen.append(p)
    path = Path(args.out).with_suffix(".prompts.jsonl")
    import json

    path.write_text("".join(json.dumps({"category": p.category, "prompt": p.text}) + "\n"
                            for p in chosen[: args.limit]))  # fmt: skip
    ks = parse_ks(args.k)
    panel.k_from.setValue(ks[0])
    panel.k_to.setValue(ks[-1])
    panel.tokens.setValue(args.tokens)
    panel.set_prompt_file(str(path))
    panel.show()
    panel.start_sweep()
    while panel.sweeping:
        app.processEvents()
        time.sleep(0.05)
    app.processEvents()
    path.unlink()
    panel.set_prompt_file(None)
    panel.grab().save(args.out)
    panel.shutdown()
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
