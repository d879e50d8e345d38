"""How much of one pair's vocabulary another tokenizer shares: the ground for a cross-
tokenizer draft restricted to the shared tokens (TLI, Timor et al., arXiv:2502.05202; not
built yet). Token strings are compared as the tokenizers store them (both built-in pairs
are byte-level BPE, a space written as 'Ġ'); the share of a target's tokens a draft could
propose is counted on the project's prompt sets, as the target tokenizes them. Not a test.

    python benchmarks/shared_vocab.py [--a resources/models/tiny/target]
                                      [--b resources/models/smollm2/draft]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETS = ("resources/prompts/tune.jsonl", "resources/prompts/repetitive.jsonl")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", default=str(ROOT / "resources/models/tiny/target"))
    parser.add_argument("--b", default=str(ROOT / "resources/models/smollm2/draft"))
    args = parser.parse_args()
    from transformers import AutoTokenizer

    toks = {
        name: AutoTokenizer.from_pretrained(path) for name, path in (("a", args.a), ("b", args.b))
    }
    vocabs = {name: set(tok.get_vocab()) for name, tok in toks.items()}
    shared = vocabs["a"] & vocabs["b"]
    a_share, b_share = len(shared) / len(vocabs["a"]), len(shared) / len(vocabs["b"])
    print(f"vocabularies: a {len(vocabs['a'])}, b {len(vocabs['b'])}, shared {len(shared)} "
          f"({a_share:.1%} of a's, {b_share:.1%} of b's)")  # fmt: skip
    texts = [json.loads(line)["prompt"] for s in SETS for line in open(ROOT / s, encoding="utf-8")]
    for target, draft in (("a", "b"), ("b", "a")):
        tok = toks[target]
        pieces = [p for t in texts for p in tok.convert_ids_to_tokens(tok(t)["input_ids"])]
        inside = sum(p in vocabs[draft] for p in pieces)
        print(f"target {target}, draft {draft}: {inside} of the target's {len(pieces)} prompt "
              f"tokens ({inside / len(pieces):.1%}) are in the draft's vocabulary")  # fmt: skip


if __name__ == "__main__":
    main()
