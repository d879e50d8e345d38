#!/usr/bin/env python
"""A head's long training, in blocks that fit the sessions a machine is lent for: each block
is fresh chats the target writes itself (scripts/head_data.py, a seed of its own), then one
`specviz train-head` run over them, warm-started from the block before (the first from
--start). Run it again and it goes on where it stopped: a block's shards are written
atomically and counted, a stopped training run resumes its checkpoint (--resume), a finished
one hands its head to the next block.

    python scripts/head_blocks.py --root work-tmp/long --start resources/models/smollm2/eagle3 \\
        --eval-data EVAL --start-tokens 2011136 --minutes 150

--minutes bounds this call: at the deadline the running step is stopped with SIGTERM (train-head
writes its checkpoint; head_data loses at most the shard it was writing) and the call returns.
`--status` prints each block and the curve's points (trained tokens counted from --start's),
the table scripts/head_curve.py draws from the same files.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GRACE_S = 300  # what a stopped step gets to write its checkpoint
POLL_S = 5.0  # how often the deadline is looked at
STOPPED: list[int] = []  # a SIGTERM or Ctrl-C here stops the running step as the deadline does


def block_dir(root: Path, index: int) -> Path:
    return root / f"b{index:03d}"


def shards_done(chats: Path) -> int:
    return len(list(chats.glob("shard-*.safetensors")))


def report(head: Path) -> dict | None:
    """The block's training.json (None before its run wrote one)."""
    try:
        return json.loads((head / "training.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def finished(head: Path) -> bool:
    r = report(head)
    return r is not None and r.get("stopped") in ("finished", "tokens", "early stop")


def dtype(args) -> str:
    """float32 on a CPU (bf16 ran slower on the CPUs measured), bfloat16 on a GPU."""
    return "float32" if args.device == "cpu" else "bfloat16"


def data_command(args, index: int) -> list[str]:
    return [sys.executable, str(REPO / "scripts" / "head_data.py"), "--pair", args.pair,
            "--out", str(block_dir(args.root, index) / "chats"), "--shards", str(args.shards),
            "--batch", str(args.batch), "--passage-share", str(args.passage_share),
            "--dtype", dtype(args), "--threads", str(args.threads), "--device", args.device,
            "--seed", str(args.seed + index)]  # fmt: skip


def train_command(args, index: int) -> list[str]:
    b = block_dir(args.root, index)
    head = b / "head"
    if (head / "checkpoint.pt").exists():
        start = ["--resume"]
    else:
        start = [
            "--from-head",
            str(args.start if index == 0 else block_dir(args.root, index - 1) / "head"),
        ]
    return [sys.executable, "-m", "specviz", "train-head", "--target", f"builtin:{args.pair}",
            "--out", str(head), *start, "--data", str(b / "chats"),
            *[x for e in args.eval_data for x in ("--eval-data", e)],
            "--ttt", "3", "--lr", str(args.lr), "--max-length", "512", "--batch", "8",
            "--epochs", str(args.epochs), "--dtype", dtype(args), "--device", args.device,
            "--save-every", "10", "--eval-every", str(args.eval_every), "--log-every", "10",
            "--patience", "0", "--threads", str(args.threads), "--no-check"]  # fmt: skip


def run_until(command: list[str], deadline: float, log: Path) -> bool:
    """Run one step niced, its output appended to log; SIGTERM at the deadline. True when it
    ran to its end."""
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        child = subprocess.Popen(["nice", "-n", "19", *command], stdout=out,
                                 stderr=subprocess.STDOUT, cwd=REPO)  # fmt: skip
        while child.poll() is None:
            if STOPPED or time.time() >= deadline:
                child.send_signal(signal.SIGTERM)
                try:
                    child.wait(GRACE_S)
                except subprocess.TimeoutExpired:
                    child.kill()
                return False
            time.sleep(POLL_S)
    if child.returncode != 0:
        raise SystemExit(f"head_blocks: {command[1]} failed ({child.returncode}); see {log}")
    return True


def status(args) -> None:
    offset = args.start_tokens
    index = 0
    while block_dir(args.root, index).exists():
        b = block_dir(args.root, index)
        r = report(b / "head")
        trained = int(r.get("trained_tokens", 0)) if r else 0
        state = (r or {}).get("stopped") or ("training" if r else "writing chats")
        print(f"{b.name}: {shards_done(b / 'chats')}/{args.shards} shards, {state}, "
              f"{trained:,} trained tokens from {offset:,}")  # fmt: skip
        for point in (r or {}).get("curve", []):
            print(f"  {offset + int(point['trained']):>12,}  #MAT K4 {point['mat_k4']:.4f}")
        if r is not None:  # what scripts/head_curve.py takes
            print(f"  curve: {b.name}={b / 'head' / 'training.json'}+{offset}")
        offset += trained
        index += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, required=True, help="the blocks' folder (b000, ...)")
    ap.add_argument("--start", type=Path, help="the head block 0 warm-starts from")
    ap.add_argument("--start-tokens", type=int, default=0,
                    help="trained tokens --start had seen (the curve's offset)")  # fmt: skip
    ap.add_argument("--eval-data", action="append", default=[], help="the held-out chats")
    ap.add_argument("--pair", default="smollm2", choices=("smollm2",))
    ap.add_argument("--shards", type=int, default=16, help="shards of chats a block")
    ap.add_argument("--batch", type=int, default=128, help="chats a shard")
    ap.add_argument("--passage-share", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=101, help="block i's chats use seed + i")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--epochs", type=float, default=2.0, help="over a block's chats")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda where a GPU is lent")
    ap.add_argument("--blocks", type=int, default=100, help="stop after this many blocks")
    ap.add_argument("--minutes", type=float, default=0.0, help="this call's budget (0: none)")
    ap.add_argument("--status", action="store_true", help="print the blocks and stop")
    args = ap.parse_args(argv)
    if args.status:
        status(args)
        return 0
    if not args.eval_data or args.start is None:
        ap.error("--start and --eval-data are needed to train")
    deadline = time.time() + args.minutes * 60 if args.minutes else float("inf")
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: STOPPED.append(1))
    args.root.mkdir(parents=True, exist_ok=True)
    log = args.root / "blocks.log"
    for index in range(args.blocks):
        head = block_dir(args.root, index) / "head"
        if finished(head):
            continue
        if shards_done(head.parent / "chats") < args.shards:
            if not run_until(data_command(args, index), deadline, log):
                return 0
        if not run_until(train_command(args, index), deadline, log):
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
