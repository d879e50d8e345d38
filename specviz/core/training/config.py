"""A training run's settings (TrainConfig) and its resumable state (RunState): the budget,
the data position, the curve and the best figure so far. The checkpoint stores exactly a
RunState, beside the weights and the optimizer (core.training.checkpoint)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields


class TrainError(ValueError):
    """Bad input for a training run: the message says what, in one line (exit code 2)."""


@dataclass(frozen=True)
class TrainConfig:
    """What `specviz train-head` was asked for (its flags, checked)."""

    # the model and the head
    target: str  # a folder, a hub id or builtin:NAME
    out: str  # the folder the head, checkpoint, training.json and README.md go to
    layers: tuple[int, ...] = ()  # aux layer ids (transformers' hidden_states[i]); (): default
    draft_vocab: int = 32768  # speculators' and SpecForge's default; capped at the target's
    ttt: int = 3  # training-time test steps (speculators' default)
    # A warm start: a trained head's folder whose weights, aux layers and draft vocabulary
    # the run starts from (its optimizer and schedule fresh); "": a new head.
    from_head: str = ""
    format: str = "speculators"  # "sglang": SGLang's layout too, in OUT/sglang
    decay: float = 0.8  # the loss weight of step s is decay ** s
    # The soft label: 0, the target's whole distribution over the draft vocabulary
    # (speculators, SpecForge); N, its N likeliest tokens renormalised (a sharper label)
    topk: int = 0
    # the data
    data: tuple[str, ...] = ()  # "PATH" or "PATH:WEIGHT"
    eval_data: tuple[str, ...] = ()  # (): a held-out split of `data`
    max_length: int = 2048  # tokens per sequence at most (longer chats are cut, text windowed)
    # the optimizer and the schedule
    lr: float = 1e-4  # speculators' examples (the built-in heads used 1e-3 on small targets)
    batch: int = 8  # sequences per step, over all ranks (the global batch)
    # Tokens per head pass at most: a batch is split into packs of whole sequences. Packed
    # sequences attend under one block-diagonal mask, whose cost grows with the square of
    # the pack (tiny, 8 x 256 tokens: 801 tokens/s in packs of 256, 559 in packs of 4096).
    pack_tokens: int = 1024
    epochs: float = 5.0  # heads over-fit after 4-5 (DeepSpec #84): early stop watches it
    warmup: int = 20  # steps of linear warm-up, then cosine to a tenth
    seed: int = 0
    # budgets and bookkeeping
    minutes: float = 0.0  # 0: no time budget
    tokens: int = 0  # training tokens (positions a loss falls on, all ranks); 0: no budget
    save_every: int = 50  # steps between checkpoints
    eval_every: int = 50  # steps between held-out measurements (the curve)
    patience: int = 4  # evaluations without a better #MAT before an early stop; 0: never
    log_every: int = 10  # steps between progress lines
    # where it runs
    device: str = "auto"  # cpu, cuda, cuda:N or auto (cuda when torch sees one)
    dtype: str = "auto"  # the target's: float32 or bfloat16 (auto: bf16 on CUDA, else fp32)

    def to_json(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, obj: dict) -> TrainConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v
                      for k, v in obj.items() if k in names})  # fmt: skip


@dataclass
class RunState:
    """Where a run stands: what a resumed run (on this machine or another) starts from."""

    # the position: steps taken, which fixes the batch stream's next batch (same seed, data)
    step: int = 0
    total_steps: int = 0  # the schedule's length (epochs x steps per epoch)
    tokens_seen: int = 0  # prefill tokens over all ranks
    trained_seen: int = 0  # of those, the positions a loss fell on (what --tokens counts)
    seconds: float = 0.0  # training time over every run of this checkpoint
    # the budgets this run was given (from TrainConfig; a resumed run may be given more)
    minutes: float = 0.0
    tokens: int = 0
    # the curve and early stopping
    curve: list[dict] = field(default_factory=list)  # one entry per held-out measurement
    losses: list[dict] = field(default_factory=list)  # {step, loss} every log_every steps
    best_mat: float = 0.0  # the best held-out #MAT at K 4 so far
    best_step: int = 0
    stale: int = 0  # evaluations since the best
    stopped: str = ""  # why the run ended: "", "finished", "minutes", "tokens", "early stop"

    def budget_left(self, elapsed: float) -> str:
        """Why the run must stop now ("" if it may go on); elapsed: this run's seconds."""
        if self.step >= self.total_steps:
            return "finished"
        if self.minutes and self.seconds + elapsed >= self.minutes * 60:
            return "minutes"
        if self.tokens and self.trained_seen >= self.tokens:
            return "tokens"
        return ""

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict) -> RunState:
        names = {f.name for f in fields(cls)}
        state = cls(**{k: v for k, v in obj.items() if k in names})
        if "trained_seen" not in obj:  # written before it was kept: plain text, a loss everywhere
            state.trained_seen = state.tokens_seen
        return state


def default_layers(n_layers: int) -> tuple[int, ...]:
    """EAGLE-3's aux layers, as speculators, vLLM and SGLang pick them: (2, L // 2, L - 3)
    (the inputs of those layers); spread apart when the target is too shallow for three
    distinct ones."""
    ids = (2, n_layers // 2, n_layers - 3)
    if len(set(ids)) == 3 and ids[0] < ids[1] < ids[2]:
        return ids
    return (1, n_layers // 2, n_layers - 1) if n_layers >= 4 else tuple(range(n_layers))


def check_config(config: TrainConfig) -> None:
    """TrainError on a setting that cannot run, before anything loads."""
    positive = {"ttt": config.ttt, "batch": config.batch, "max_length": config.max_length,
                "draft_vocab": config.draft_vocab, "save_every": config.save_every,
                "eval_every": config.eval_every, "log_every": config.log_every,
                "pack_tokens": config.pack_tokens}  # fmt: skip
    for name, value in positive.items():
        if value < 1:
            raise TrainError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if config.max_length < 8:
        raise TrainError("--max-length must be at least 8 tokens")
    if not 0 < config.lr < 1:
        raise TrainError(f"--lr must be in (0, 1), got {config.lr}")
    if config.epochs <= 0 or config.minutes < 0 or config.tokens < 0:
        raise TrainError("--epochs must be positive; --minutes and --tokens not negative")
    if not 0 < config.decay <= 1:
        raise TrainError(f"--decay must be in (0, 1], got {config.decay}")
    if config.topk < 0:
        raise TrainError(f"--topk must be 0 (the whole distribution) or more, got {config.topk}")
    if config.ttt > 16:
        raise TrainError(f"--ttt {config.ttt}: at most 16 training-time test steps")
    if config.dtype not in ("auto", "float32", "bfloat16", "float16"):
        raise TrainError(f"--dtype {config.dtype}: float32, bfloat16, float16 or auto")
    if config.format not in ("speculators", "sglang"):
        raise TrainError(f"--format {config.format}: speculators or sglang")
    if not config.data:
        raise TrainError("give the training text: --data FILE[:WEIGHT][,FILE...]")
