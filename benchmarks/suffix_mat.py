"""#MAT (emitted tokens per target pass) of each drafter in `specviz tune --json` outputs, by
category, with a 95% interval from a bootstrap over the category's prompts (the ratio of
total tokens to total passes, prompts resampled with replacement, 2000 times, seed 0). The
ratio suffix / lookup is bootstrapped the same way, pairing each prompt's two runs. Not a
test: never part of the test run.

    SPECVIZ_CACHE=$(mktemp -d) specviz tune --pair tiny --drafter lookup,suffix --k 8 \\
        --prompts resources/prompts/repetitive.jsonl --temperature 0 --max-new-tokens 64 \\
        --json > rep.json
    python benchmarks/suffix_mat.py rep.json [more.json ...]
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

import numpy as np


def runs_by_category(result: dict) -> dict[str, dict[str, dict[int, tuple[float, int]]]]:
    """{category: {drafter: {prompt: (tokens, passes)}}} from a tune --json result."""
    out: dict = defaultdict(lambda: defaultdict(dict))
    for run in result["prompt_runs"]:
        passes = run["rounds"]
        tokens = run["tokens_per_pass"] * passes
        out[run["category"]][run["drafter"]][run["prompt"]] = (tokens, passes)
    return out


def interval(pairs: list[tuple[float, int]], rng, n: int = 2000) -> tuple[float, float, float]:
    """(#MAT, low, high): the ratio of sums and its bootstrap 95% interval."""
    arr = np.array(pairs, dtype=float)  # [prompts, 2]
    mat = arr[:, 0].sum() / arr[:, 1].sum()
    picks = rng.integers(0, len(arr), size=(n, len(arr)))
    boot = arr[picks, 0].sum(1) / arr[picks, 1].sum(1)
    return mat, float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))


def ratio(a: list, b: list, rng, n: int = 2000) -> tuple[float, float, float]:
    """suffix #MAT over lookup's, prompts paired, with its bootstrap 95% interval."""
    x, y = np.array(a, dtype=float), np.array(b, dtype=float)
    point = (x[:, 0].sum() / x[:, 1].sum()) / (y[:, 0].sum() / y[:, 1].sum())
    picks = rng.integers(0, len(x), size=(n, len(x)))
    boot = (x[picks, 0].sum(1) / x[picks, 1].sum(1)) / (y[picks, 0].sum(1) / y[picks, 1].sum(1))
    return point, float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))


def main(paths: list[str]) -> None:
    rng = np.random.default_rng(0)
    for path in paths:
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
        print(f"== {path}")
        table = runs_by_category(result)
        table["overall"] = defaultdict(dict)
        for category in list(table)[:-1]:
            for drafter, prompts in table[category].items():
                table["overall"][drafter].update(prompts)
        for category, drafters in table.items():
            cells = []
            for drafter in ("lookup", "suffix"):
                if drafter in drafters:
                    mat, low, high = interval(list(drafters[drafter].values()), rng)
                    cells.append(f"{drafter} {mat:.2f} [{low:.2f}, {high:.2f}]")
            if {"lookup", "suffix"} <= set(drafters):
                shared = sorted(set(drafters["lookup"]) & set(drafters["suffix"]))
                a = [drafters["suffix"][p] for p in shared]
                b = [drafters["lookup"][p] for p in shared]
                point, low, high = ratio(a, b, rng)
                cells.append(f"suffix/lookup {point:.2f}x [{low:.2f}, {high:.2f}]")
            n = len(next(iter(drafters.values())))
            print(f"  {category:16s} ({n:2d} prompts)  " + "   ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
