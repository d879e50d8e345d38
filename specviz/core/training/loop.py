"""The training loop (nanoGPT's shape): the data stream, the step, the held-out
measurement and the checkpoint, each a named helper; `train` reads top to bottom.

Under torchrun every rank reads the same batch stream and takes its share of each batch
(sequences rank, rank + N, ...); the loss is normalised by the global batch's row counts and
the head's gradients are summed over the ranks (one flat all-reduce), so N ranks take the
step one process would. Stopping (a budget, an early stop, Ctrl-C or SIGTERM) is agreed by
all ranks at a step's end; rank 0 writes every file.
"""

from __future__ import annotations

import contextlib
import math
import platform
import signal
import time
from collections.abc import Callable
from datetime import datetime, timezone

import torch

from specviz.core.training import checkpoint, examples
from specviz.core.training.export import write_sglang, write_speculators
from specviz.core.training.objective import build_pack, counts, measure, pack_loss, split_packs
from specviz.core.training.setup import Run


def lr_at(step: int, total: int, base: float, warmup: int) -> float:
    """Linear warm-up, then a cosine down to a tenth of `base`."""
    ramp = min(1.0, (step + 1) / max(1, warmup))
    return base * ramp * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(step, total) / total)))


def _all_sum(run: Run, tensor: torch.Tensor) -> torch.Tensor:
    if run.world > 1:
        import torch.distributed as dist

        tensor = tensor.to(run.teacher.device)
        dist.all_reduce(tensor)
    return tensor.cpu()


def _autocast(run: Run):
    if run.autocast is None:
        return contextlib.nullcontext()
    return torch.autocast(run.teacher.device.type, dtype=run.autocast)


def train_step(run: Run, batch: list[examples.Example]) -> tuple[float, int, int]:
    """One optimizer step on a global batch: (its loss, its tokens and of those the positions
    a loss fell on, over all ranks)."""
    c = run.config
    mine = batch[run.rank :: run.world]
    packs = [build_pack(run.teacher, g, run.pad) for g in split_packs(mine, c.pack_tokens)]
    local = sum((counts(p, c.ttt) for p in packs), torch.zeros(c.ttt, dtype=torch.float64))
    total = _all_sum(run, local)  # [ttt] rows scored at each step over the global batch
    for group in run.optimizer.param_groups:
        group["lr"] = lr_at(run.state.step, run.state.total_steps, c.lr, c.warmup)
    run.optimizer.zero_grad(set_to_none=True)
    loss_sum = 0.0
    for pack in packs:
        with _autocast(run):
            loss = pack_loss(run.head, run.teacher, pack, run.draft_ids, c.ttt, c.decay, total,
                             c.topk)  # fmt: skip
        if loss.requires_grad:
            loss.backward()
        loss_sum += float(loss.detach())
    _reduce_grads(run)
    torch.nn.utils.clip_grad_norm_(run.params, 1.0)
    run.optimizer.step()
    sums = [float(sum(len(ex.ids) for ex in mine)), float(sum(ex.trained for ex in mine)), loss_sum]
    tokens, trained, loss_sum = _all_sum(run, torch.tensor(sums, dtype=torch.float64)).tolist()
    return loss_sum, int(tokens), int(trained)


def _reduce_grads(run: Run) -> None:
    """Sum the head's gradients over the ranks (the loss is already globally normalised)."""
    for p in run.params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    if run.world == 1:
        return
    import torch.distributed as dist

    flat = torch.cat([p.grad.reshape(-1) for p in run.params])
    dist.all_reduce(flat)
    at = 0
    for p in run.params:
        p.grad.copy_(flat[at : at + p.numel()].view_as(p))
        at += p.numel()


def evaluate(run: Run, elapsed: float, loss: float | None) -> dict:
    """Measure the held-out acceptance, add it to the curve, keep the best head (loss None:
    before the first step)."""
    steps = max(run.config.ttt, 4)
    with _autocast(run):
        figures = measure(run.head, run.teacher, run.held, run.draft_ids, steps,
                          run.config.pack_tokens, run.pad)  # fmt: skip
    s = run.state
    entry = {"step": s.step, "tokens": s.tokens_seen, "trained": s.trained_seen,
             "seconds": round(s.seconds + elapsed, 1),
             "loss": None if loss is None else round(loss, 4), **figures}  # fmt: skip
    s.curve.append(entry)
    if entry["mat_k4"] > s.best_mat * 1.001 or run.best is None:
        s.best_mat, s.best_step, s.stale = entry["mat_k4"], s.step, 0
        run.best = {k: v.detach().cpu().clone() for k, v in run.head.state_dict().items()}
    else:
        s.stale += 1
    return entry


def save_checkpoint(run: Run, elapsed: float) -> None:
    """Rank 0 writes the checkpoint and training.json (both atomically)."""
    if run.rank == 0:
        state = run.state
        seconds, state.seconds = state.seconds, state.seconds + elapsed
        try:
            run.out.mkdir(parents=True, exist_ok=True)
            checkpoint.save(run.out / checkpoint.CHECKPOINT, run.head, run.optimizer, state,
                            run.config, run.identity, run.draft_ids.tolist(), run.data_sha,
                            run.best)  # fmt: skip
            checkpoint.write_json(run.out / "training.json", report(run))
        finally:
            state.seconds = seconds
    _barrier(run)


def _barrier(run: Run) -> None:
    if run.world > 1:
        import torch.distributed as dist

        dist.barrier()


def _agreed_stop(run: Run, reason: str, interrupted: bool) -> str:
    """The stop reason all ranks agree on (rank 0's budget, anyone's interruption)."""
    if run.world == 1:
        return "interrupted" if interrupted else reason
    codes = ("", "finished", "minutes", "tokens", "early stop")
    flags = torch.zeros(2, dtype=torch.float64)
    flags[0] = codes.index(reason) if run.rank == 0 else 0
    flags[1] = float(interrupted)
    flags = _all_sum(run, flags)
    return "interrupted" if flags[1] else codes[int(flags[0])]


def train(run: Run, say: Callable[[str], None]) -> str:
    """Train until a budget, the schedule's end, an early stop or a signal; the reason.
    Rank 0 writes the checkpoint every save_every steps and at the end, training.json at
    every measurement, and the head (best measured) unless interrupted."""
    c, s = run.config, run.state
    interrupted = []
    handlers = {sig: signal.signal(sig, lambda *_: interrupted.append(1))
                for sig in (signal.SIGINT, signal.SIGTERM)}  # fmt: skip
    start, last_log, last_tokens = time.perf_counter(), time.perf_counter(), s.tokens_seen
    loss, reason = float("nan"), ""
    try:
        stream = examples.batch_stream(run.train, run.weights, c.batch, c.seed, s.step)
        if c.from_head and not s.curve:  # a warm start's curve begins where its head stands
            _said(run, evaluate(run, 0.0, None), say)
        run.head.train()
        while not (reason := _agreed_stop(run, s.budget_left(time.perf_counter() - start)
                                          or reason, bool(interrupted))):  # fmt: skip
            loss, tokens, trained = train_step(run, next(stream))
            s.step, s.tokens_seen = s.step + 1, s.tokens_seen + tokens
            s.trained_seen += trained
            elapsed = time.perf_counter() - start
            if s.step % c.log_every == 0:
                now = time.perf_counter()
                rate = (s.tokens_seen - last_tokens) / max(now - last_log, 1e-9)
                last_log, last_tokens = now, s.tokens_seen
                s.losses.append({"step": s.step, "loss": round(loss, 4)})
                say(progress_line(run, loss, rate, elapsed))
            if s.step % c.eval_every == 0 or s.step >= s.total_steps:
                _said(run, evaluate(run, elapsed, loss), say)
                if c.patience and s.stale >= c.patience:
                    reason = "early stop"
                if run.rank == 0:  # the curve so far, readable while the run goes on
                    run.out.mkdir(parents=True, exist_ok=True)
                    checkpoint.write_json(run.out / "training.json", report(run))
            if s.step % c.save_every == 0:
                save_checkpoint(run, elapsed)
        elapsed = time.perf_counter() - start
        if reason != "interrupted" and (not s.curve or s.curve[-1]["step"] != s.step):
            evaluate(run, elapsed, loss)
        s.stopped = reason
        save_checkpoint(run, elapsed)
        s.seconds += elapsed
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    if reason != "interrupted" and run.rank == 0:
        export(run)
    _barrier(run)
    return reason


def _said(run: Run, entry: dict, say) -> None:
    s = run.state
    say(f"held out at step {s.step}: acceptance {entry['acceptance']}, #MAT K 3 "
        f"{entry['mat_k3']:.2f}, K 4 {entry['mat_k4']:.2f} (best {s.best_mat:.2f} at step "
        f"{s.best_step})")  # fmt: skip


def progress_line(run: Run, loss: float, rate: float, elapsed: float) -> str:
    """`step 40/300  tokens 82k  1,234 tokens/s  loss 2.314  ~3m12s left`."""
    s = run.state
    per_step = (s.seconds + elapsed) / max(s.step, 1)
    left = (s.total_steps - s.step) * per_step
    if s.minutes:
        left = min(left, s.minutes * 60 - s.seconds - elapsed)
    if s.tokens and rate > 0 and s.trained_seen:
        trained_rate = rate * s.trained_seen / max(s.tokens_seen, 1)
        left = min(left, (s.tokens - s.trained_seen) / trained_rate)
    left = max(left, 0.0)
    return (f"step {s.step}/{s.total_steps}  tokens {s.tokens_seen:,} "
            f"({s.trained_seen:,} trained)  {rate:,.0f} tokens/s  "
            f"loss {loss:.3f}  ~{int(left // 60)}m{int(left % 60):02d}s left")  # fmt: skip


def export(run: Run) -> None:
    """The best measured head in the speculators format in --out (and SGLang's in
    --out/sglang with --format sglang)."""
    if run.best is not None:
        run.head.load_state_dict({k: v.to(run.teacher.device) for k, v in run.best.items()})
    head = run.head.float().cpu()
    write_speculators(head, run.out, run.config.target, run.architectures)
    if run.config.format == "sglang":
        write_sglang(head, run.out / "sglang")


def report(run: Run) -> dict:
    """training.json: the settings, the data, the curve, the best, the throughput."""
    s = run.state
    return {
        "schema": "specviz.training/1",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "target": run.config.target,
        "layers": list(run.config.layers),
        "draft_vocab": int(run.draft_ids.numel()),
        "world_size": run.world,
        "device": str(run.teacher.device),
        "dtype": str(run.teacher.weight.dtype).removeprefix("torch."),
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "config": run.config.to_json(),
        "data": [
            {
                "path": x.path,
                "kind": x.kind,
                "weight": x.weight,
                "bytes": x.bytes,
                "documents": len(x.documents),
                "skipped": x.skipped,
                "licence": x.licence,
            }
            for x in run.sources
        ],  # fmt: skip
        "train_sequences": len(run.train),
        "heldout_sequences": len(run.held),
        "steps": s.step,
        "total_steps": s.total_steps,
        "tokens_seen": s.tokens_seen,
        "trained_tokens": s.trained_seen,
        "seconds": round(s.seconds, 1),
        "tokens_per_second": round(s.tokens_seen / s.seconds, 1) if s.seconds else None,
        "stopped": s.stopped,
        "best": {"step": s.best_step, "mat_k4": s.best_mat},
        "curve": s.curve,
        "losses": s.losses,
    }
