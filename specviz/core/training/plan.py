"""What a run will take, said before it starts: the disk its files need (from the head's
parameter counts) and the time (one probe step, timed, its gradients thrown away)."""

from __future__ import annotations

import time

import torch

from specviz.core.training import examples
from specviz.core.training.objective import build_pack, counts, pack_loss, split_packs
from specviz.core.training.setup import Run


def disk_bytes(run: Run) -> dict[str, int]:
    """Bytes of the checkpoint (fp32 weights, Adam's two moments, the best head) and of the
    head's files (bf16; SGLang's copy too with --format sglang)."""
    total = sum(p.numel() for p in run.head.parameters())
    trainable = sum(p.numel() for p in run.params)
    head = 2 * total * (2 if run.config.format == "sglang" else 1)
    return {"checkpoint": 4 * (2 * total + 2 * trainable), "head": head}


def probe(run: Run) -> tuple[float, int]:
    """(seconds, tokens) of one step's teacher pass, loss and backward on this rank's share
    of the next batch; nothing is learned from it."""
    c = run.config
    batch = next(examples.batch_stream(run.train, run.weights, c.batch, c.seed, run.state.step))
    mine = batch[run.rank :: run.world]
    start = time.perf_counter()
    packs = [build_pack(run.teacher, g, run.pad) for g in split_packs(mine, c.pack_tokens)]
    total = sum((counts(p, c.ttt) for p in packs), torch.zeros(c.ttt, dtype=torch.float64))
    for pack in packs:
        loss = pack_loss(run.head, run.teacher, pack, run.draft_ids, c.ttt, c.decay, total)
        if loss.requires_grad:
            loss.backward()
    run.optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - start, sum(len(ex.ids) for ex in mine)


def plan_text(run: Run) -> str:
    """The lines said before the first step: data, schedule, time and disk."""
    s, c = run.state, run.config
    tokens = sum(len(ex.ids) for ex in run.train)
    per_epoch = examples.steps_per_epoch(run.train, run.weights, c.batch)
    per_step = tokens / max(1, len(run.train)) * c.batch
    planned = (s.total_steps - s.step) * per_step
    if s.tokens:  # the budget counts trained positions; the prefill reads all the tokens
        share = max(1, sum(ex.trained for ex in run.train)) / max(1, tokens)
        planned = min(planned, max(0.0, s.tokens - s.trained_seen) / share)
    seconds, probed = probe(run)
    rate = probed * run.world / max(seconds, 1e-9)  # tokens/s over all ranks
    eta = planned / rate
    if s.minutes:
        eta = min(eta, max(0.0, s.minutes * 60 - s.seconds))
    disk = disk_bytes(run)
    trained = sum(ex.trained for ex in run.train)
    return "\n".join([
        f"data: {len(run.train)} sequences, {tokens:,} tokens ({trained:,} trained), "
        f"{len(run.held)} held out; draft vocabulary {run.draft_ids.numel():,}; aux layers "
        f"{list(c.layers)}",
        f"schedule: {per_epoch} steps an epoch, steps {s.step}..{s.total_steps} of "
        f"{c.batch} sequences over {run.world} rank(s)",
        f"estimate: ~{planned:,.0f} tokens at ~{rate:,.0f} tokens/s (one probe step): "
        f"~{eta / 60:.1f} min; disk: checkpoint {disk['checkpoint'] / 1e6:.1f} MB, head "
        f"{disk['head'] / 1e6:.1f} MB in {c.out}",
    ])  # fmt: skip
