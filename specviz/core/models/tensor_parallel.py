"""A tensor-parallel target under torchrun (`specviz run --tp-size N`): the target's layers
split over N processes by transformers' tensor-parallel plan (DistributedConfig, tp_plan
"auto") on torch.distributed (gloo on CPU, nccl on CUDA); the draft whole on every rank.

Every rank runs the same engine with the same seed on the same logits (a row-wise layer's
all-reduce leaves every rank the same sums), so they take the same decisions round for
round; `Lockstep` checks it after each round (rank 0's emitted ids broadcast and compared)
and stops a session whose ranks disagree rather than let them drift. Rank 0 alone prints
and writes the trace.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


class TensorParallelError(ValueError):
    """--tp-size cannot be followed here, with what to do about it."""


@dataclass(frozen=True)
class TPContext:
    size: int  # ranks the target is split over
    rank: int  # this process's
    local_rank: int

    @property
    def leader(self) -> bool:
        return self.rank == 0


def tp_context(tp_size: int, device: str = "cpu") -> TPContext | None:
    """The torchrun process group for --tp-size (None for 1), started here: gloo on CPU,
    nccl on CUDA, with a long timeout (a served session's ranks wait for the next request
    as long as the client takes). TensorParallelError when not under torchrun with as many
    processes."""
    if tp_size < 1:
        raise TensorParallelError(f"--tp-size must be >= 1, got {tp_size}")
    if tp_size == 1:
        return None
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world != tp_size or "RANK" not in os.environ:
        raise TensorParallelError(
            f"--tp-size {tp_size} runs under torchrun with as many processes: "
            f"`torchrun --standalone --nproc-per-node {tp_size} -m specviz run --tp-size "
            f"{tp_size} ...` (this process has WORLD_SIZE {world})"
        )
    import datetime

    import torch.distributed as dist

    if not dist.is_initialized():
        backend = "nccl" if device.startswith("cuda") else "gloo"
        dist.init_process_group(backend, timeout=datetime.timedelta(days=30))
    return TPContext(tp_size, int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0")))


def check_plan(config, tp_size: int, spec: str) -> None:
    """Refuse a target without a tensor-parallel plan, or whose heads do not divide by N."""
    plan = getattr(config, "base_model_tp_plan", None)
    if not plan:
        raise TensorParallelError(
            f"{spec} ({type(config).__name__}) has no tensor-parallel plan in transformers: "
            "it cannot be split with --tp-size"
        )
    for name in ("num_attention_heads", "num_key_value_heads"):
        heads = getattr(config, name, None)
        if heads is not None and heads % tp_size:
            raise TensorParallelError(
                f"{spec} has {heads} {name.replace('num_', '').replace('_', ' ')}, which "
                f"do not divide by --tp-size {tp_size}"
            )


def tp_load_kwargs(source: str, local: bool, tp_size: int, spec: str) -> dict:
    """from_pretrained's arguments that split the target over the process group."""
    from transformers import AutoConfig, DistributedConfig

    check_plan(AutoConfig.from_pretrained(source, local_files_only=local), tp_size, spec)
    return {"distributed_config": DistributedConfig(tp_plan="auto")}


class Lockstep:
    """After each round: rank 0's emitted ids, broadcast, must be this rank's."""

    def __init__(self, context: TPContext):
        self.context = context

    def check(self, rnd) -> None:
        import torch.distributed as dist

        mine = [t.id for t in rnd.tokens if t.emitted]
        theirs = [mine]
        dist.broadcast_object_list(theirs, src=0)
        if theirs[0] != mine:
            raise TensorParallelError(
                f"rank {self.context.rank} emitted {mine} in round {rnd.index}, rank 0 "
                f"{theirs[0]}: the ranks no longer agree"
            )
