"""`specviz train-head --target T --data FILE --out DIR`: train an EAGLE-3 head for a target
from text, the target's own soft labels computed online (core.training).

Each step runs the target's prefill over a batch (no grad) for its aux layers' states and
its distribution over the draft vocabulary, then trains the head (speculators' recipe:
training-time test, KL to the target). The held-out acceptance per draft position and the
simulated #MAT at K 3 and 4 go to DIR/training.json as a curve; the best measured head is
written in the speculators format to DIR (`specviz run --drafter eagle3 --head DIR`, vLLM),
with --format sglang in SGLang's too (DIR/sglang), then measured by check-head, with a model
card (DIR/README.md). The checkpoint (DIR/checkpoint.pt) is written every --save-every steps,
at the end and on Ctrl-C or SIGTERM; --resume continues it, here or on another machine.
Under `torchrun --nproc-per-node N` the ranks share each batch (gloo on CPU, NCCL on GPUs).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specviz.cli.terminal import printable


def add_parser(sub) -> None:
    p = sub.add_parser("train-head", help="train an EAGLE-3 head for a target from text",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--target", required=True, metavar="T",
                   help="a model folder, a hub id or builtin:NAME")  # fmt: skip
    p.add_argument("--out", required=True, metavar="DIR", help="where the head goes")
    p.add_argument("--data", action="append", default=[], metavar="FILE[:W][,...]",
                   help="training text: plain text, JSONL chats (messages or ShareGPT "
                   "conversations), Spec-Bench-style questions with answers, a folder of "
                   "token-id shards, or debian:NAME (an installed Debian package's English "
                   "text; debian:DIR, one unpacked); :W weights a file in the mix "
                   "(repeatable)")  # fmt: skip
    p.add_argument(
        "--eval-data",
        action="append",
        default=[],
        metavar="FILE",
        help="held-out text (default: 5%% of --data, at most 64 sequences)",
    )
    p.add_argument(
        "--layers",
        default=None,
        metavar="I,J,K",
        help="aux layer ids (transformers' hidden_states[i]; default 2, L//2, L-3)",
    )
    p.add_argument(
        "--draft-vocab",
        type=int,
        default=None,
        help="draft vocabulary: the most frequent trained tokens (default 32768)",
    )
    p.add_argument("--ttt", type=int, default=3, help="training-time test steps")
    p.add_argument("--topk", type=int, default=0, metavar="N",
                   help="soft labels over the target's N likeliest draft tokens, renormalised "
                   "(0: its whole distribution over the draft vocabulary)")  # fmt: skip
    p.add_argument("--format", choices=("speculators", "sglang"), default="speculators",
                   help="sglang: SGLang's layout too, in DIR/sglang")  # fmt: skip
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    p.add_argument(
        "--dtype",
        default="auto",
        help="the target's: float32, bfloat16 (auto: bfloat16 on CUDA, else float32)",
    )
    p.add_argument("--minutes", type=float, default=0.0, help="time budget (0: none)")
    p.add_argument(
        "--tokens",
        type=int,
        default=0,
        help="training-token budget: positions a loss falls on (0: none)",
    )
    p.add_argument(
        "--resume",
        nargs="?",
        const="",
        default=None,
        metavar="CKPT",
        help="continue a checkpoint (default: DIR/checkpoint.pt)",
    )
    p.add_argument("--from-head", metavar="HEAD",
                   help="warm start: a trained head's weights, layers and draft vocabulary "
                   "(a fresh optimizer and schedule; where no checkpoint was kept)")  # fmt: skip
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--batch", type=int, default=8, help="sequences per step, all ranks")
    p.add_argument("--epochs", type=float, default=5.0)
    p.add_argument("--max-length", type=int, default=2048, help="tokens per sequence")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-every", type=int, default=50, help="steps between checkpoints")
    p.add_argument("--eval-every", type=int, default=50, help="steps between measurements")
    p.add_argument(
        "--patience",
        type=int,
        default=4,
        help="measurements without a better #MAT before stopping (0: never)",
    )
    p.add_argument("--pack-tokens", type=int, default=1024, help="tokens per head pass")
    p.add_argument("--log-every", type=int, default=10, help="steps between progress lines")
    p.add_argument("--no-check", action="store_true", help="skip check-head at the end")
    p.add_argument("--threads", type=int, default=None, help="torch threads per rank")


def _config(args: argparse.Namespace):
    from specviz.core.training.config import TrainConfig, TrainError

    try:
        layers = tuple(int(x) for x in args.layers.split(",")) if args.layers else ()
    except ValueError:
        raise TrainError(f"--layers {args.layers}: comma-separated layer ids") from None
    return TrainConfig(
        target=args.target, out=args.out, layers=layers, from_head=args.from_head or "",
        draft_vocab=args.draft_vocab or 32768, ttt=args.ttt, topk=args.topk, format=args.format,
        data=tuple(args.data), eval_data=tuple(args.eval_data), max_length=args.max_length,
        lr=args.lr, batch=args.batch, pack_tokens=args.pack_tokens, epochs=args.epochs,
        seed=args.seed, minutes=args.minutes, tokens=args.tokens, save_every=args.save_every,
        eval_every=args.eval_every, patience=args.patience, log_every=args.log_every,
        device=args.device, dtype=args.dtype,
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from specviz.cli.options import fail

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    try:
        return _train(args)
    except (ValueError, OSError) as e:  # TrainError, HeadError, a file that vanished
        return fail(str(e))
    finally:
        _leave_group()


def _say(rank: int):
    def say(message: str) -> None:
        if rank == 0:
            print(printable(message), file=sys.stderr, flush=True)

    return say


def _train(args: argparse.Namespace) -> int:
    import os

    from specviz.core.training.checkpoint import CHECKPOINT, write_atomic, write_json
    from specviz.core.training.config import TrainError
    from specviz.core.training.export import model_card
    from specviz.core.training.loop import report, train
    from specviz.core.training.plan import plan_text
    from specviz.core.training.setup import prepare

    config = _config(args)
    say = _say(int(os.environ.get("RANK", "0")))
    resume = None
    if args.resume is not None:
        resume = Path(args.resume or Path(args.out) / CHECKPOINT)
    try:
        run_ = prepare(config, resume, args.draft_vocab is not None, say)
    except TrainError:
        raise
    except Exception as e:  # ModelLoadError and friends: one line
        if type(e).__name__ in ("ModelLoadError", "BuiltinError"):
            raise TrainError(str(e)) from None
        raise
    if resume is not None:
        state = run_.state
        say(f"resumed {resume} at step {state.step} ({state.trained_seen:,} trained tokens)")
    say(plan_text(run_))
    reason = train(run_, say)
    out = run_.out
    if reason == "interrupted":
        say(f"interrupted at step {run_.state.step}: checkpoint {out / CHECKPOINT} written; "
            "continue with --resume")  # fmt: skip
        return 130
    if run_.rank != 0:
        return 0
    result = report(run_)
    if not args.no_check:
        result["check_head"] = _check_head(run_, say)
    write_json(out / "training.json", result)
    write_atomic(out / "README.md", model_card(result).encode())
    last = result["curve"][-1] if result["curve"] else {}
    # the result on stdout (what a script reads), the progress above it on stderr
    print(printable(f"{reason}: head written to {out} (kept step {result['best']['step']}, "
                    f"held-out #MAT K 4 {result['best']['mat_k4']:.2f}; last acceptance "
                    f"{last.get('acceptance')}); {result['tokens_per_second'] or 0:,.0f} "
                    "tokens/s"), flush=True)  # fmt: skip
    return 0


def _check_head(run_, say) -> dict | None:
    """check-head's measurement of the written head (the target's greedy answers)."""
    from specviz.cli.heads.check_head import describe, measure

    ns = argparse.Namespace(head=str(run_.out), prompts=None, steps=4, tokens=64,
                            no_chat=False, device=str(run_.teacher.device))  # fmt: skip
    found = measure(ns, run_.config.target)
    say(describe(found))
    return found


def _leave_group() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
