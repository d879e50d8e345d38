"""Block verification against token-wise: tokens per target pass, same pair, prompts, K and
seeds, interleaved (token, block, token, block, ...), in one process. Reported per K: each
rule's tokens per pass and their ratio with a 95% bootstrap interval over the sessions
(paired by prompt and seed). Not a test: never part of the test run.

    python benchmarks/verifiers.py --pair tiny --k 2-8 --prompts 8 --repeats 3
    python benchmarks/verifiers.py --pair tiny --drafter lookup   # a one-hot q
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from specviz.core.drafters.registry import DrafterConfig  # noqa: E402
from specviz.core.engine.speculative import SpeculativeEngine  # noqa: E402
from specviz.core.engine.threads import set_threads  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402
from specviz.core.resources import example_prompts  # noqa: E402
from specviz.core.trace.records import Settings  # noqa: E402


def passes(pair, prompt: str, settings: Settings, drafter=None) -> tuple[int, int]:
    """(emitted tokens, target passes) of one session."""
    engine = SpeculativeEngine(pair, settings, trace=False, drafter=drafter)
    engine.prefill(prompt, calibrate=False)
    rounds = list(engine.run())
    return sum(r.n_emitted for r in rounds), len(rounds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="tiny")
    parser.add_argument("--k", default="2-8", help="a range, e.g. 2-8")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="seeds per prompt")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--drafter", default="model", choices=("model", "lookup"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    lo, hi = (int(v) for v in args.k.split("-"))
    set_threads(None)
    name = f"builtin:{args.pair}"
    pair = load_pair(name, name)
    prompts = example_prompts()[: args.prompts]
    drafter = DrafterConfig(args.drafter)
    rng = np.random.default_rng(0)
    rows = []
    for k in range(lo, hi + 1):
        per = {"token": [], "block": []}  # (emitted, passes) per session, paired
        for prompt in prompts:
            for seed in range(args.repeats):
                for rule in ("token", "block"):  # interleaved
                    s = Settings(k=k, temperature=args.temperature, seed=seed,
                                 max_new_tokens=args.tokens, verifier=rule)  # fmt: skip
                    per[rule].append(passes(pair, prompt, s, drafter))
        t, b = (np.array(per[r], dtype=float) for r in ("token", "block"))
        ratio = (b[:, 0].sum() / b[:, 1].sum()) / (t[:, 0].sum() / t[:, 1].sum())
        boot = []
        for _ in range(2000):
            i = rng.integers(0, len(t), len(t))
            boot.append((b[i, 0].sum() / b[i, 1].sum()) / (t[i, 0].sum() / t[i, 1].sum()))
        rows.append(
            {
                "k": k,
                "token_tokens_per_pass": t[:, 0].sum() / t[:, 1].sum(),
                "block_tokens_per_pass": b[:, 0].sum() / b[:, 1].sum(),
                "block_over_token": ratio,
                "ci": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
                "sessions": len(t),
            }
        )
    if args.json:
        meta = {"pair": name, "drafter": args.drafter, "temperature": args.temperature}
        print(json.dumps({**meta, "rows": rows}, indent=1))
        return 0
    print(f"{name}, drafter {args.drafter}, T {args.temperature}, {args.tokens} tokens, "
          "sessions paired by prompt and seed")  # fmt: skip
    print("  K  token tok/pass  block tok/pass  block/token [95%]")
    for r in rows:
        print(
            f" {r['k']:2d}  {r['token_tokens_per_pass']:14.3f}  {r['block_tokens_per_pass']:14.3f}"
            f"  {r['block_over_token']:.3f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
