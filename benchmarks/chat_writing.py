"""How fast the target writes its own chats (scripts/head_data.py's sample_batch), its cache
reserved once against transformers' DynamicCache growing by concatenation (the baseline: what
head_data.py did before, each finished row leaving the batch at once), interleaved in one
process on the same prompts: answer tokens a second and their ratio. Greedy, so both must
write the same answers (checked). Not a test.

The prompts are the user turns of the committed held-out chats (resources/models/smollm2/
heldout-chats), taken `--batch` at a time, as a shard of head_data.py is written.

    python benchmarks/chat_writing.py --batch 64 --max-new 128 --repeats 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

from specviz.core.engine.threads import set_threads  # noqa: E402
from specviz.core.training.sources import read_id_shards  # noqa: E402
from tests.fixtures import script  # noqa: E402  (scripts/NAME.py as a module)


def concatenating(head_data):
    """head_data's sample_batch as it was: DynamicLayer (torch.cat each step), each finished
    row leaving at once."""
    from transformers.cache_utils import DynamicLayer

    def run(*args):
        reserved, share = head_data.reserved_layer, head_data.FINISHED_SHARE
        head_data.reserved_layer, head_data.FINISHED_SHARE = (lambda capacity: DynamicLayer), 0.0
        try:
            return head_data.sample_batch(*args)
        finally:
            head_data.reserved_layer, head_data.FINISHED_SHARE = reserved, share

    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=2, help="interleaved runs of each")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    set_threads(args.threads)
    with script("head_data") as head_data:
        return compare(head_data, args)


def compare(head_data, args) -> int:
    model, tok, _ = head_data.load_target("smollm2", "float32")
    _, docs = read_id_shards(ROOT / "resources" / "models" / "smollm2" / "heldout-chats")
    rows = [list(d.ids[: d.start]) for d in docs[: args.batch]]
    ways = {"reserved": head_data.sample_batch, "concatenating": concatenating(head_data)}
    rates: dict[str, list[float]] = {name: [] for name in ways}
    answers: dict[str, list] = {}
    for r in range(args.repeats):
        for name, run in ways.items():
            start = time.perf_counter()
            out = run(model, tok, rows, args.max_new, 0.0, None)
            seconds = time.perf_counter() - start
            tokens = sum(map(len, out))
            rates[name].append(tokens / seconds)
            answers.setdefault(name, out)
            print(f"repeat {r} {name:>13}: {tokens} answer tokens in {seconds:.1f} s, "
                  f"{tokens / seconds:.1f} tokens/s", flush=True)  # fmt: skip
    same = answers["reserved"] == answers["concatenating"]
    pairs = [a / b for a, b in zip(rates["reserved"], rates["concatenating"], strict=True)]
    print(f"smollm2 float32, batch {len(rows)}, {args.max_new} new at most, "
          f"{args.threads} threads: reserved/concatenating {statistics.median(pairs):.2f}x "
          f"(per repeat {', '.join(f'{p:.2f}' for p in pairs)}); same answers: {same}")  # fmt: skip
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
