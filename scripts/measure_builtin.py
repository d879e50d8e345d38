"""Measure a built-in pair with specviz's own engine and record it beside the weights.

Runs `SpeculativeEngine` over the example prompts and writes
resources/models/<name>/measured.json: alpha, acceptance, c, measured and predicted speedup.
`specviz models` shows these figures.

    python scripts/measure_builtin.py --pair tiny --k 4 --temperature 1
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys

from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.metrics.running import SummaryFold
from specviz.core.models.builtin import get_pair
from specviz.core.models.pair import load_pair
from specviz.core.resources import example_prompts
from specviz.core.trace.records import Settings
from specviz.core.trace.session import Session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="tiny")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--dry-run", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    builtin = get_pair(args.pair)
    name = f"builtin:{builtin.name}"
    pair = load_pair(name, name)
    settings = Settings(k=args.k, temperature=args.temperature, max_new_tokens=args.max_new_tokens)
    fold: SummaryFold | None = None
    for i, prompt in enumerate(example_prompts()[: args.prompts]):
        engine = SpeculativeEngine(pair, Settings(**{**vars(settings), "seed": i}))
        session = Session(engine.prefill(prompt))
        if fold is None:  # one fold over every prompt's rounds: the one speedup path, its
            fold = SummaryFold(session.header, window=10**9)  # window all of them
        for rnd in engine.run():
            fold.add(rnd)
        print(f"prompt {i}: {engine.n_generated} tokens", file=sys.stderr)
    s = fold.summary()
    result = {
        "pair": name,
        "k": args.k,
        "temperature": args.temperature,
        "max_new_tokens": args.max_new_tokens,
        "prompts": args.prompts,
        "dtype": str(next(pair.target.parameters()).dtype).removeprefix("torch."),
        "rounds": s["rounds"],
        "tokens": s["tokens"],
        "alpha": s["alpha"],
        "acceptance_rate": s["acceptance_rate"],
        "draft_efficiency": s["draft_efficiency"],
        "tokens_per_forward": s["tokens_per_forward"],
        "c": s["cost_ratio"],
        "target_ms_per_token": s["baseline_ms_per_token"],
        "speculative_ms_per_token": s["ms_per_token"],
        "speedup_measured": s["speedup_measured"],
        "speedup_ci": s["speedup_ci"],
        "speedup_predicted": s["speedup_predicted"],
        "speedup_refined": s["speedup_refined"],
        "machine": f"{os.cpu_count()}-core {platform.machine()} CPU, load average "
        f"{os.getloadavg()[0]:.1f} at the end",
        "date": datetime.date.today().isoformat(),
        "command": "python scripts/measure_builtin.py " + " ".join(argv or sys.argv[1:]),
    }
    print(json.dumps(result, indent=1))
    if not args.dry_run:
        path = builtin.folder / "measured.json"
        path.write_text(json.dumps(result, indent=1) + "\n")
        print(f"written to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
