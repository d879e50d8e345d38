"""Heads of one target compared on the same held-out chats, paired: each head's simulated #MAT
at K 4 (sampled at T 1, and greedy) and its difference from the first head's, with a 95%
bootstrap interval over the chats (core.training.compare). A trained head replaces the shipped
one when the interval of its difference excludes zero.

    python scripts/head_compare.py resources/models/smollm2/eagle3 work-tmp/long/b001/head \\
        --target builtin:smollm2 --eval-data resources/models/smollm2/heldout-chats --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("heads", nargs="+", type=Path, help="head folders; the first is the base")
    ap.add_argument("--target", default="builtin:smollm2")
    ap.add_argument("--eval-data", action="append", required=True, help="held-out chats")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's own)")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args(argv)
    if len(args.heads) < 2:
        ap.error("give two heads or more: the base first")
    import torch

    from specviz.core.training.compare import LEVEL, compare_heads, paired_difference

    if args.threads:
        torch.set_num_threads(args.threads)
    measured = compare_heads(args.target, args.heads, args.eval_data, device=args.device,
                             dtype=args.dtype, say=lambda m: print(m, file=sys.stderr))  # fmt: skip
    base = measured[0][1]
    rows = []
    print(f"{'head':<44} {'#MAT K4':>8} {'greedy':>8}   difference from the first, {LEVEL:.0%}")
    for path, tallies in measured:
        whole = tallies.summary()
        diff = paired_difference(base, tallies) if tallies is not base else None
        rows.append({"head": str(path), **whole, "difference": diff})
        text = (
            ""
            if diff is None
            else "   ".join(
                f"{key} {d:+.4f} [{lo:+.4f}, {hi:+.4f}]" for key, (d, lo, hi) in diff.items()
            )
        )
        print(f"{str(path)[-44:]:<44} {whole['mat_k4']:>8.4f} {whole['mat_k4_greedy']:>8.4f}   "
              f"{text}")  # fmt: skip
    if args.json:
        sequences = int(base.alpha.shape[0])
        args.json.write_text(json.dumps({"target": args.target, "eval_data": args.eval_data,
                                         "sequences": sequences, "level": LEVEL,
                                         "heads": rows}, indent=2) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
