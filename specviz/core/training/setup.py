"""Everything a training run needs before its first step: the ranks, the target, the data,
the draft vocabulary, the head and its optimizer, fresh or from a checkpoint (a resumed
run takes the checkpoint's settings for everything that fixes the data stream)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from specviz.core.training import checkpoint, examples, sources
from specviz.core.training.config import (
    RunState,
    TrainConfig,
    TrainError,
    check_config,
    default_layers,
)
from specviz.core.training.export import head_config, new_head
from specviz.core.training.teacher import Teacher

# What a resumed run may change; everything else (the data stream, the head) is the
# checkpoint's.
RESUMABLE = (
    "target", "out", "data", "eval_data", "device", "dtype", "minutes", "tokens",
    "save_every", "eval_every", "log_every", "patience", "pack_tokens", "format",
)  # fmt: skip


@dataclass
class Run:
    """A prepared run: what the loop (core.training.loop) reads and updates."""

    config: TrainConfig
    state: RunState
    teacher: Teacher
    head: torch.nn.Module
    optimizer: torch.optim.Optimizer
    params: list[torch.nn.Parameter]
    train: list[examples.Example]
    held: list[examples.Example]
    weights: list[float]
    draft_ids: torch.Tensor  # [Vd] sorted target ids, on the target's device
    sources: list[sources.Source]
    identity: dict
    data_sha: str
    out: Path
    pad: int
    architectures: tuple[str, ...]
    rank: int = 0
    world: int = 1
    autocast: torch.dtype | None = None  # the head's passes run in this dtype (None: fp32)
    best: dict | None = None  # the best head's state dict so far (keep-best)
    notes: list[str] = field(default_factory=list)


def distributed() -> tuple[int, int, int]:
    """(rank, world size, local rank); under torchrun the process group is started: NCCL
    on GPUs, gloo on CPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1, 0
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return dist.get_rank(), world, local


def pick_device(name: str, local_rank: int) -> str:
    """cpu, or a CUDA device (this rank's under torchrun); TrainError when none is there."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise TrainError(f"--device {name}: torch sees no CUDA GPU (torch "
                             f"{torch.__version__}); use --device cpu")  # fmt: skip
        name = f"cuda:{local_rank}" if name == "cuda" else name
        torch.cuda.set_device(name)  # NCCL's collectives run on the current device
        return name
    if name != "cpu":
        raise TrainError(f"--device {name}: cpu, cuda, cuda:N or auto")
    return name


def load_teacher(config: TrainConfig, device: str, say: Callable[[str], None],
                 saved: dict | None = None, warm: bool = False):  # fmt: skip
    """(Teacher, tokenizer, the target's config) with the aux layers hooked; saved: a
    checkpoint's identity, whose shapes the target must have (TrainError); warm: the
    layers are config.from_head's (--layers, if given, must be the same)."""
    from specviz.core.models.pair import ModelLoadError, load_pair

    dtype = config.dtype
    if dtype == "auto":
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    try:
        pair = load_pair(config.target, None, device=device, dtype=dtype, pack_weights=False,
                         progress=say)  # fmt: skip
    except ModelLoadError as e:
        raise TrainError(str(e)) from None
    text = pair.target.config.get_text_config()
    if saved is not None:
        shapes = {"target": config.target, "hidden": text.hidden_size,
                  "n_layers": text.num_hidden_layers,
                  "vocab": int(pair.target.get_output_embeddings().weight.shape[0])}  # fmt: skip
        checkpoint.check_identity(saved, shapes)
    layers = config.layers or default_layers(text.num_hidden_layers)
    if warm:
        from specviz.core.drafters.eagle3.format import read_config

        head_layers = read_config(Path(config.from_head), text.num_hidden_layers)[0].aux_layers
        if config.layers and tuple(config.layers) != tuple(head_layers):
            raise TrainError(f"--from-head {config.from_head} reads layers {list(head_layers)}, "
                             f"not --layers {list(config.layers)}")  # fmt: skip
        layers = head_layers
    return Teacher(pair.target, tuple(layers)), pair.tokenizer, pair.target.config


def warm_head(config: TrainConfig, teacher: Teacher, target_config, draft_vocab_given: bool):
    """(the head in config.from_head, its draft ids): its weights to start from, checked
    against this target (HeadError) and --draft-vocab if given (TrainError)."""
    from specviz.core.drafters.eagle3.format import build_head

    text = target_config.get_text_config()
    head, hc, _ = build_head(Path(config.from_head), text.num_hidden_layers, text.hidden_size,
                             int(teacher.weight.shape[0]), lm_head_from=teacher.weight.float(),
                             lm_head_note=False)  # fmt: skip
    if draft_vocab_given and config.draft_vocab != hc.draft_vocab:
        raise TrainError(f"--from-head {config.from_head} drafts {hc.draft_vocab} tokens, not "
                         f"--draft-vocab {config.draft_vocab}")  # fmt: skip
    ids = (torch.arange(hc.draft_vocab) + head.d2t.long()).tolist()
    return head, ids


def pad_id(tokenizer) -> int:
    """The id packed rows are padded with (never trained on)."""
    if tokenizer.pad_token_id is not None:
        return tokenizer.pad_token_id
    return tokenizer.eos_token_id or 0


def max_positions(target_config) -> int | None:
    """The longest sequence the target's position table takes (None: not said)."""
    text = target_config.get_text_config()
    for name in ("max_position_embeddings", "n_positions"):
        value = getattr(text, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def read_data(config: TrainConfig, found, tokenizer, say) -> tuple[list, list, list[float]]:
    """(train examples, held-out examples, weights) of the sources read."""
    encoded = examples.encode_sources(tokenizer, found, config.max_length, say)
    if config.eval_data:
        held_sources = sources.read_sources(config.eval_data)
        held = examples.encode_sources(tokenizer, held_sources, config.max_length, lambda m: None)
        train = encoded
    else:
        train, held = examples.split_heldout(encoded)
    return train, held[: examples.MAX_EVAL], [s.weight for s in found]


def prepare(config: TrainConfig, resume: Path | None, draft_vocab_given: bool,
            say: Callable[[str], None]) -> Run:  # fmt: skip
    """A run ready for its first (or next) step; TrainError on bad input, before the
    output folder holds anything new."""
    blob = checkpoint.load(resume) if resume is not None else None
    if blob is not None:
        old = TrainConfig.from_json(blob["config"])
        given = {k: getattr(config, k) for k in RESUMABLE}
        if not config.data:
            given["data"] = old.data
        if config.layers and tuple(config.layers) != tuple(old.layers):
            raise TrainError(f"--resume: the checkpoint reads layers {list(old.layers)}, not "
                             f"{list(config.layers)}")  # fmt: skip
        if draft_vocab_given and config.draft_vocab != old.draft_vocab:
            raise TrainError(f"--resume: the checkpoint's draft vocabulary is "
                             f"{old.draft_vocab} tokens, not {config.draft_vocab}")  # fmt: skip
        config = dataclasses.replace(old, **given)
    check_config(config)
    found = sources.read_sources(config.data)  # the files' own faults first, nothing loaded
    out = Path(config.out)
    checkpoint.check_out(out)
    rank, world, local = distributed()
    if config.batch < world:
        raise TrainError(f"--batch {config.batch} is smaller than the {world} ranks")
    device = pick_device(config.device, local)
    saved = blob["identity"] if blob is not None else None
    warm = bool(config.from_head) and blob is None  # a resumed run has its own weights
    teacher, tokenizer, target_config = load_teacher(config, device, say, saved, warm)
    config = dataclasses.replace(config, layers=teacher.layers)
    positions = max_positions(target_config)
    if positions is not None and config.max_length > positions:  # past it: an index error
        say(f"--max-length {config.max_length} is cut to the target's {positions} positions")
        config = dataclasses.replace(config, max_length=positions)
    train, held, weights = read_data(config, found, tokenizer, say)
    data_sha = examples.fingerprint(train + held, weights)
    ident = checkpoint.identity(teacher, config.target)
    vocab = teacher.weight.shape[0]
    warm_start = None
    if blob is not None:
        checkpoint.check_resume(blob, ident, config, draft_vocab_given, data_sha)
        draft_ids = list(blob["draft_ids"])
    elif warm:
        warm_start, draft_ids = warm_head(config, teacher, target_config, draft_vocab_given)
        config = dataclasses.replace(config, draft_vocab=len(draft_ids))
        say(
            f"warm start: {config.from_head} (its weights, layers {list(config.layers)} and "
            f"draft vocabulary of {len(draft_ids):,}; a fresh optimizer and schedule)"
        )
    else:
        eos = tokenizer.eos_token_id
        always = tuple(i for i in (eos, tokenizer.pad_token_id, tokenizer.bos_token_id)
                       if isinstance(i, int))  # fmt: skip
        draft_ids = examples.draft_vocabulary(train, config.draft_vocab, vocab, always)
    torch.manual_seed(config.seed)
    hc = head_config(target_config, config.layers, len(draft_ids), config.ttt)
    head = new_head(hc, teacher.weight, draft_ids).to(teacher.device)
    if warm_start is not None:
        try:
            head.load_state_dict(warm_start.state_dict())
        except RuntimeError as e:  # another decoder layer's shapes
            raise TrainError(
                f"--from-head {config.from_head}: its layer is not the one "
                f"this target's head has ({str(e).splitlines()[-1].strip()})"
            ) from None
    params = [p for p in head.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0, betas=(0.9, 0.95))
    state = RunState(minutes=config.minutes, tokens=config.tokens)
    best = None
    if blob is not None:
        head.load_state_dict(blob["head"])
        optimizer.load_state_dict(blob["optimizer"])
        state = RunState.from_json(blob["state"])
        state.minutes, state.tokens, state.stopped = config.minutes, config.tokens, ""
        best = blob.get("best")
    if world > 1:  # one starting head on every rank
        import torch.distributed as dist

        for p in head.state_dict().values():
            dist.broadcast(p, 0)
    if not state.total_steps:
        per_epoch = examples.steps_per_epoch(train, weights, config.batch)
        state.total_steps = max(1, round(per_epoch * config.epochs))
    pad = pad_id(tokenizer)
    # The head trains in bf16 autocast on a GPU with a half-precision target; on a CPU in
    # float32: a CPU without bf16 units ran smollm2's head backward 15x slower in bf16 (41 s
    # against 2.4 s for 254 rows, a 2-core AMD EPYC without AVX-512, 2026-12-06).
    half = teacher.weight.dtype in (torch.bfloat16, torch.float16) and teacher.device.type == "cuda"
    return Run(config=config, state=state, teacher=teacher, head=head, optimizer=optimizer,
               params=params, train=train, held=held, weights=weights,
               draft_ids=torch.tensor(draft_ids, device=teacher.device), sources=found,
               identity=ident, data_sha=data_sha, out=out, pad=pad,
               architectures=tuple(getattr(target_config, "architectures", None) or ()),
               rank=rank, world=world, autocast=torch.bfloat16 if half else None,
               best=best)  # fmt: skip
