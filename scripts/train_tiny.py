#!/usr/bin/env python
"""Train specviz's built-in offline model pair, `builtin:tiny`, from scratch.

Corpus: the King James Bible (Debian `bible-kjv` + `bible-kjv-text`, public domain) and
the BSD fortune cookies (Debian `fortunes` + `fortunes-min`). One document is a Bible
chapter or a fortune; every 50th document is held out for evaluation.

Steps, all with a fixed seed:
  1. byte-level BPE tokenizer (8192 tokens, `<|endoftext|>` = bos = eos = pad);
  2. GPT-2 target (6 layers, d=192) trained on the text;
  3. GPT-2 draft (1 layer, d=192) that starts from the target's embeddings, first block
     and final norm, then is distilled from the target's logits (forward KL at
     temperature 1), to bring its q as close to the target's p, and so the acceptance
     rate alpha as high, as a draft of its size allows; with --align-steps (and the draft
     of an earlier run, --draft-from) the target first trains further on cross-entropy plus
     weight x (1 - alpha against that frozen draft), trading a little loss for a target a
     one-layer draft can follow, and the draft is then distilled again from it;
  4. both saved as Hugging Face folders (fp16 safetensors + the same tokenizer), then
     reloaded from disk to measure held-out loss, alpha = E[sum_x min(p(x), q(x))] at
     temperature 1, and decode speed; the figures go to <out>/training.json.

Training windows are 256 tokens long but start at a random position id in [0, 1024-256],
so all 1024 learned position embeddings are trained and long sessions stay sensible.

    python scripts/train_tiny.py --out A         # target and a first draft
    python scripts/train_tiny.py --target-from A --draft-from A --align-steps 400 \
        --draft-steps 400 --draft-lr 1e-3 --out B  # the shipped pair (resources/models/README.md)
    python scripts/train_tiny.py --smoke         # seconds; writes to a temporary folder
    python scripts/train_tiny.py --smoke --out DIR

Exit status 2 (with the `apt-get install` line to run) when the corpus packages are missing.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "resources" / "models" / "tiny"
FORTUNE_DIR = Path("/usr/share/games/fortunes")
BIBLE_RANGE = "Gen1:1-Rev22:21"
EOT = "<|endoftext|>"
HOLD_OUT_EVERY = 50  # document i is held out when i % 50 == 25


@dataclass(frozen=True)
class RunConfig:
    vocab_size: int = 8192
    n_positions: int = 1024
    block: int = 256  # training window length (position ids are offset, see module doc)
    batch: int = 8  # windows per step: 8 x 256 = 2048 tokens
    target_layers: int = 6
    target_dim: int = 192
    target_heads: int = 3
    target_steps: int = 4000
    target_lr: float = 3e-3
    # 1.76M training tokens for 4.4M parameters: without dropout, three epochs left the
    # training loss 0.19 nats below the held-out loss (4.40 against 4.59); with 0.1 and 4000
    # steps held-out reaches 4.38, but a 1-layer draft then follows it at alpha 0.78 only,
    # hence the alignment below (resources/models/README.md).
    target_dropout: float = 0.1
    # At this size a decode step costs mostly per-layer overhead, so the draft's depth,
    # not its width, sets c = draft step / target step: one layer. A 2-layer draft (alpha
    # 0.81 against the 4.38 target, 0.78 for one layer) cost c 0.51 and ran at 0.70x.
    draft_layers: int = 1
    draft_dim: int = 192  # = target_dim: the draft starts from the target's weights
    draft_heads: int = 3
    draft_steps: int = 900
    draft_lr: float = 3e-3
    # "kl": KL(target || draft); "tvd": total variation 1 - sum_x min(p(x), q(x)), which is
    # 1 - alpha itself (DistillSpec, Zhou et al. 2023), for a draft first distilled on KL
    draft_objective: str = "kl"
    # Then, with a draft to align to (--draft-from): the target trained on cross-entropy plus
    # align_weight x (1 - alpha against that frozen draft), and the draft distilled again.
    align_steps: int = 0
    align_weight: float = 5.0
    align_lr: float = 3e-4
    warmup: int = 30
    eval_block: int = 256
    eval_tokens: int = 0  # 0 = the whole held-out split
    # bf16 autocast trained 1.46x faster where the CPU has bf16 units, but a bf16 matmul
    # was ~50x slower than fp32 on an AVX2-only CPU: off unless asked for (--bf16).
    bf16: bool = False
    log_every: int = 10
    eval_every: int = 250  # held-out loss of the target while it trains (0 = never)
    corpus_docs: int = 0  # 0 = all documents; the smoke run takes a slice


# fmt: off
SMOKE = RunConfig(
    vocab_size=400, n_positions=128, block=32, batch=4,
    target_layers=2, target_dim=32, target_heads=2, target_steps=4,
    draft_layers=1, draft_dim=32, draft_heads=2, draft_steps=4,
    warmup=2, eval_block=32, eval_tokens=1024, log_every=1, eval_every=2, corpus_docs=150,
)
# fmt: on


def log(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------- corpus


def missing_packages() -> list[str]:
    """Debian packages of the corpus that are not installed (checked by what they ship)."""
    missing = []
    if shutil.which("bible") is None:
        missing.append("bible-kjv")
    if not Path("/usr/lib/bible.data").exists():
        missing.append("bible-kjv-text")
    if not (FORTUNE_DIR / "art").is_file():
        missing.append("fortunes")
    if not (FORTUNE_DIR / "fortunes").is_file():
        missing.append("fortunes-min")
    return missing


def bible_chapters() -> list[str]:
    """One document per chapter: 'Genesis 1' then one verse a line, verse numbers dropped."""
    out = subprocess.run(
        ["bible", "-l0", BIBLE_RANGE], capture_output=True, text=True, check=True
    ).stdout
    chapters, current = [], []
    for line in out.splitlines():
        verse = re.match(r"^\s+\d+ (.*)$", line)
        if verse:
            current.append(verse.group(1).strip())
        elif line.strip():  # a chapter heading such as "Genesis 1"
            if current:
                chapters.append("\n".join(current))
            current = [line.strip()]
    if current:
        chapters.append("\n".join(current))
    return chapters


def fortunes() -> list[str]:
    files = sorted(
        p
        for p in FORTUNE_DIR.iterdir()
        if p.is_file() and not p.is_symlink() and p.suffix not in (".dat", ".u8")
    )
    entries = []
    for path in files:
        text = path.read_bytes().decode("utf-8", errors="replace")
        entries += [e.strip("\n") for e in text.split("\n%\n") if e.strip()]
    return entries


def load_corpus(limit: int) -> tuple[list[str], list[str], dict]:
    bible, fort = bible_chapters(), fortunes()
    if limit:  # a slice of both sources, for --smoke
        bible, fort = bible[: limit // 3], fort[: limit - limit // 3]
    docs = bible + fort
    train = [d for i, d in enumerate(docs) if i % HOLD_OUT_EVERY != HOLD_OUT_EVERY // 2]
    held = [d for i, d in enumerate(docs) if i % HOLD_OUT_EVERY == HOLD_OUT_EVERY // 2]
    stats = {
        "bible_chapters": len(bible),
        "fortunes": len(fort),
        "bible_bytes": sum(len(d.encode()) for d in bible),
        "fortune_bytes": sum(len(d.encode()) for d in fort),
        "train_docs": len(train),
        "heldout_docs": len(held),
        "train_bytes": sum(len(d.encode()) for d in train),
        "heldout_bytes": sum(len(d.encode()) for d in held),
    }
    return train, held, stats


# ------------------------------------------------------------------------ tokenizer


def train_tokenizer(docs: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[EOT],  # id 0
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(docs, trainer=trainer)
    return tok


def wrap_tokenizer(tok, n_positions: int):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOT,
        eos_token=EOT,
        pad_token=EOT,
        model_max_length=n_positions,
    )


def save_tokenizer(fast, folder: Path) -> None:
    fast.save_pretrained(folder)
    # transformers 5 writes "TokenizersBackend", which transformers 4.x cannot load.
    cfg_path = folder / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")


def encode_stream(tok, docs: list[str]):
    """All documents as one token stream, each preceded by <|endoftext|>."""
    import torch

    eot = tok.token_to_id(EOT)
    ids: list[int] = []
    for enc in tok.encode_batch(docs):
        ids.append(eot)
        ids += enc.ids
    return torch.tensor(ids, dtype=torch.long)


# --------------------------------------------------------------------------- models


def make_model(
    cfg: RunConfig, layers: int, dim: int, heads: int, vocab: int, eot: int, dropout: float = 0.0
):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=vocab,
        n_positions=cfg.n_positions,
        n_embd=dim,
        n_layer=layers,
        n_head=heads,
        resid_pdrop=dropout,
        embd_pdrop=dropout,
        attn_pdrop=dropout,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
    )
    return GPT2LMHeadModel(config)


def init_draft_from_target(draft, target) -> list[str]:
    """Copy the target's embeddings, final norm and first blocks into the draft."""
    own = draft.state_dict()
    copied = {k: v for k, v in target.state_dict().items() if k in own and own[k].shape == v.shape}
    draft.load_state_dict(copied, strict=False)
    return sorted(copied)


def batches(stream, cfg: RunConfig, generator):
    """Endless random windows [B, block+1] with position ids [B, block] (random offsets)."""
    import torch

    n = len(stream) - cfg.block - 1
    span = torch.arange(cfg.block)
    while True:
        starts = torch.randint(0, n, (cfg.batch,), generator=generator)
        x = torch.stack([stream[s : s + cfg.block + 1] for s in starts])  # [B, T+1]
        offsets = torch.randint(
            0, cfg.n_positions - cfg.block + 1, (cfg.batch, 1), generator=generator
        )
        yield x, offsets + span  # [B, T+1], [B, T]


def lr_at(step: int, total: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    frac = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))  # cosine to 10%


def optimizer(model, lr: float):
    import torch

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def train(
    model,
    stream,
    cfg: RunConfig,
    steps: int,
    peak_lr: float,
    name: str,
    seed: int,
    teacher=None,
    held=None,
    partner=None,
) -> dict:
    """Train on next-token cross-entropy, or on KL(teacher || model) when a teacher is given.
    With a (frozen) partner draft, add cfg.align_weight * (1 - sum_x min(p(x), q(x))), p the
    model's, q the partner's: the target gives up some loss for what a draft can follow.
    With `held` (a token stream), log the held-out loss every `cfg.eval_every` steps."""
    import torch
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(seed)
    opt = optimizer(model, peak_lr)
    model.train()
    data = batches(stream, cfg, gen)
    t0 = time.perf_counter()
    tokens, loss_sum, loss_n, last_t, last_tokens = 0, 0.0, 0, t0, 0
    curve: list[tuple[int, float]] = []
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, peak_lr, cfg.warmup)
        x, pos = next(data)
        inputs, targets = x[:, :-1], x[:, 1:]  # [B, T]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.bf16):
            logits = model(input_ids=inputs, position_ids=pos).logits  # [B, T, V]
            if teacher is not None or partner is not None:
                with torch.no_grad():
                    t_logits = (teacher or partner)(input_ids=inputs, position_ids=pos).logits
        log_q = F.log_softmax(logits.float(), dim=-1).flatten(0, 1)  # [B*T, V]
        if teacher is None:
            loss = F.nll_loss(log_q, targets.flatten())
            if partner is not None:
                q_partner = F.softmax(t_logits.float(), dim=-1).flatten(0, 1)  # [B*T, V]
                tv = 1 - torch.minimum(log_q.exp(), q_partner).sum(-1).mean()
                loss = loss + cfg.align_weight * tv
        else:
            log_p = F.log_softmax(t_logits.float(), dim=-1).flatten(0, 1)  # [B*T, V]
            if cfg.draft_objective == "tvd":  # 1 - alpha at each position
                loss = 1 - torch.minimum(log_p.exp(), log_q.exp()).sum(-1).mean()
            else:
                loss = F.kl_div(log_q, log_p, log_target=True, reduction="batchmean")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += inputs.numel()
        loss_sum, loss_n = loss_sum + loss.item(), loss_n + 1
        if (step + 1) % cfg.log_every == 0 or step + 1 == steps:
            now = time.perf_counter()
            rate = (tokens - last_tokens) / (now - last_t)
            kind = cfg.draft_objective if teacher else "loss + align" if partner else "loss"
            log(
                f"[{name}] step {step + 1}/{steps}  {kind} {loss_sum / loss_n:.4f}  "
                f"{rate:,.0f} tokens/s  {now - t0:.0f}s"
            )
            loss_sum, loss_n, last_t, last_tokens = 0.0, 0, now, tokens
        if held is not None and cfg.eval_every and (step + 1) % cfg.eval_every == 0:
            model.eval()
            if partner is not None:  # the loss and alpha against the partner
                ev = evaluate(model, partner, held, cfg.eval_block, 0)
                curve.append((step + 1, round(ev.target_loss, 4), round(ev.alpha, 4)))
                log(f"[{name}] step {step + 1}/{steps}  held-out loss {ev.target_loss:.4f}, "
                    f"alpha with the partner {ev.alpha:.4f}")  # fmt: skip
            elif teacher is None:
                curve.append((step + 1, round(heldout_loss(model, held, cfg.eval_block), 4)))
                log(f"[{name}] step {step + 1}/{steps}  held-out loss {curve[-1][1]:.4f}")
            else:  # alpha on the first 32k held-out tokens
                ev = evaluate(teacher, model, held, cfg.eval_block, 32768)
                curve.append((step + 1, round(ev.alpha, 4)))
                log(f"[{name}] step {step + 1}/{steps}  held-out alpha {ev.alpha:.4f}")
            model.train()
    model.eval()
    wall = time.perf_counter() - t0
    measured = "alpha" if teacher else "loss_alpha" if partner else "loss"
    return {
        "steps": steps,
        "tokens": tokens,
        "wall_s": round(wall, 1),
        "tokens_per_s": round(tokens / wall),
        "peak_lr": peak_lr,
        **({f"heldout_{measured}_curve": curve} if curve else {}),
        "objective": (
            f"next-token cross-entropy + {cfg.align_weight} x (1 - sum_x min(p(x), q(x))), "
            "q a frozen draft's"
            if partner is not None
            else "next-token cross-entropy"
            if teacher is None
            else "1 - sum_x min(p(x), q(x)), temperature 1"
            if cfg.draft_objective == "tvd"
            else "KL(target || draft), temperature 1"
        ),
    }


# ------------------------------------------------------------------------ evaluation


@dataclass
class Evaluation:
    target_loss: float
    draft_loss: float
    alpha: float
    positions: int
    block: int


def heldout_windows(stream, block: int):
    """The stream cut into consecutive windows of block + 1 tokens, 8 at a time: [B, block+1]."""
    import torch

    n_windows = (len(stream) - 1) // block
    for w in range(0, n_windows, 8):
        rows = range(w, min(n_windows, w + 8))
        yield torch.stack([stream[r * block : r * block + block + 1] for r in rows])


def evaluate(target, draft, stream, block: int, max_tokens: int) -> Evaluation:
    """Held-out loss of each and alpha = mean over positions of sum_x min(p(x), q(x))."""
    import torch
    import torch.nn.functional as F

    if max_tokens:
        stream = stream[: max_tokens + 1]
    t_nll = d_nll = overlap = 0.0
    count = 0
    with torch.inference_mode():
        for x in heldout_windows(stream, block):
            inputs, targets = x[:, :-1], x[:, 1:].flatten()  # [B, T], [B*T]
            mask = torch.ones_like(inputs)  # nothing is padding (pad = eos = bos here)
            p_logits = target(input_ids=inputs, attention_mask=mask).logits  # [B, T, V]
            q_logits = draft(input_ids=inputs, attention_mask=mask).logits  # [B, T, V]
            log_p = F.log_softmax(p_logits.float(), -1).flatten(0, 1)  # [B*T, V]
            log_q = F.log_softmax(q_logits.float(), -1).flatten(0, 1)  # [B*T, V]
            t_nll += F.nll_loss(log_p, targets, reduction="sum").item()
            d_nll += F.nll_loss(log_q, targets, reduction="sum").item()
            overlap += torch.minimum(log_p.exp(), log_q.exp()).sum().item()  # sum_x min(p,q)
            count += targets.numel()
    return Evaluation(t_nll / count, d_nll / count, overlap / count, count, block)


def heldout_loss(model, stream, block: int) -> float:
    """Mean next-token loss of one model over the held-out stream in windows of `block`."""
    import torch
    import torch.nn.functional as F

    nll, count = 0.0, 0
    with torch.inference_mode():
        for x in heldout_windows(stream, block):
            logits = model(input_ids=x[:, :-1]).logits  # [B, T, V]
            log_p = F.log_softmax(logits.float(), -1).flatten(0, 1)  # [B*T, V]
            nll += F.nll_loss(log_p, x[:, 1:].flatten(), reduction="sum").item()
            count += x[:, 1:].numel()
    return nll / count


def decode_ms_per_token(model, n_new: int = 64) -> float:
    """Greedy decoding with the KV cache, one token at a time, after a warm-up."""
    import torch

    ids = torch.zeros((1, 1), dtype=torch.long)  # <|endoftext|>
    with torch.inference_mode():
        for timed in (False, True):
            cache, x, length = None, ids, 0
            t0 = time.perf_counter()
            for _ in range(n_new):
                length += 1
                mask = torch.ones((1, length), dtype=torch.long)
                # `cache` is the 5.24 name of the old `past_key_values`
                out = model(input_ids=x, attention_mask=mask, cache=cache, use_cache=True)
                cache, x = out.cache, out.logits[:, -1:].argmax(-1)  # x: [1, 1]
            if timed:
                return (time.perf_counter() - t0) * 1000 / n_new
    raise AssertionError("unreachable")


# ------------------------------------------------------------------------------ main


def measure(out: Path, held_stream, cfg: RunConfig, runs: dict) -> dict:
    """Load the saved folders the way specviz will and measure loss, alpha, speed."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    models = {
        role: AutoModelForCausalLM.from_pretrained(out / role, dtype=torch.float32)
        for role in ("target", "draft")
    }
    AutoTokenizer.from_pretrained(out / "target")
    load_s = time.perf_counter() - t0
    evals = [evaluate(models["target"], models["draft"], held_stream, block, cfg.eval_tokens)
             for block in (cfg.eval_block, cfg.n_positions)]  # fmt: skip
    for ev in evals:
        log(
            f"held-out ({ev.positions:,} positions, windows of {ev.block}): target loss "
            f"{ev.target_loss:.3f}, draft loss {ev.draft_loss:.3f}, alpha {ev.alpha:.3f}"
        )
    result: dict = {}
    for role, model in models.items():
        c = model.config
        ms = decode_ms_per_token(model, min(64, cfg.block // 2))  # 64 but in --smoke
        log(f"decode: {role} {ms:.2f} ms/token")
        result[role] = {
            "architecture": "GPT2LMHeadModel", "layers": c.n_layer, "d_model": c.n_embd,
            "heads": c.n_head, "n_positions": c.n_positions, "vocab_size": c.vocab_size,
            "params": model.num_parameters(), "weights_dtype": "float16",
            "bytes_on_disk": folder_bytes(out / role), "training": runs[role],
            **{f"heldout_loss_{ev.block}": round(getattr(ev, f"{role}_loss"), 4)
               for ev in evals},
            "decode_ms_per_token": round(ms, 2),
        }  # fmt: skip
    result["alpha"] = {
        "temperature": 1.0,
        "definition": "mean over held-out positions of sum_x min(p(x), q(x)), "
        "p target, q draft, softmax of logits",
        **{f"windows_{ev.block}": round(ev.alpha, 4) for ev in evals},
        "positions": evals[0].positions,
    }
    result["load_s"] = round(load_s, 2)
    log(f"load both + tokenizer {load_s:.2f}s")
    return result


def save_model(model, fast_tok, folder: Path) -> None:
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    model.to(torch.float16).save_pretrained(folder)
    model.to(torch.float32)  # keeps the fp16 rounding: what is trained next sees the saved weights
    for path in folder.iterdir():
        path.chmod(0o644)  # safetensors writes 0600
    save_tokenizer(fast_tok, folder)


def load_weights(model, folder: Path) -> dict:
    """An earlier run's saved weights into `model` (the same architecture); that run's
    training figures."""
    from safetensors.torch import load_file

    state = load_file(str(folder / "model.safetensors"))
    missing, unexpected = model.load_state_dict(
        {k: v.float() for k, v in state.items()}, strict=False
    )
    if unexpected or [k for k in missing if k != "lm_head.weight"]:  # lm_head is tied to wte
        raise SystemExit(f"{folder} is not this run's {folder.name} architecture")
    earlier = json.loads((folder.parent / "training.json").read_text())
    return {**earlier[folder.name]["training"], "command": earlier["command"]}


def reuse_target(run: Path, model, folder: Path):
    """Load DIR/target into `model` (the same architecture), copy it to `folder`, and return
    the model with that run's training figures."""
    training = load_weights(model, run / "target")
    if folder.resolve() != (run / "target").resolve():
        shutil.copytree(run / "target", folder, dirs_exist_ok=True)
    earlier = json.loads((run / "training.json").read_text())
    loss = next(v for k, v in earlier["target"].items() if k.startswith("heldout_loss_"))
    log(f"target: reused from {run} (held-out loss {loss})")
    return model, training


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny slice, a few steps (seconds)")
    ap.add_argument(
        "--out",
        type=Path,
        help="output folder (default: resources/models/tiny; with --smoke: a new temporary folder)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--target-steps", type=int)
    ap.add_argument("--draft-steps", type=int)
    ap.add_argument("--draft-layers", type=int)
    ap.add_argument("--target-dropout", type=float, help="dropout of the target while it trains")
    ap.add_argument("--draft-lr", type=float)
    ap.add_argument("--align-steps", type=int, help="align the target to the --draft-from draft")
    ap.add_argument("--align-weight", type=float)
    ap.add_argument("--align-lr", type=float)
    ap.add_argument("--draft-objective", choices=("kl", "tvd"))
    ap.add_argument(
        "--draft-from",
        type=Path,
        metavar="DIR",
        help="start the draft from an earlier run's (DIR/draft) instead of the target's layers",
    )
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast (CPUs with bf16 units)")
    ap.add_argument(
        "--target-from",
        type=Path,
        metavar="DIR",
        help="reuse the target of an earlier run (DIR/target, DIR/training.json) and distill "
        "only a new draft from it",
    )
    args = ap.parse_args(argv)
    if args.align_steps and not args.draft_from:  # before anything is loaded or trained
        ap.error("--align-steps needs --draft-from DIR: the draft to align to")

    missing = missing_packages()
    if missing:
        log(
            "The training corpus comes from Debian packages that are not installed. Run:\n"
            f"    apt-get install {' '.join(missing)}"
        )
        return 2

    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    cfg = SMOKE if args.smoke else RunConfig()
    overrides = {"target_steps": args.target_steps, "draft_steps": args.draft_steps,
                 "draft_layers": args.draft_layers, "bf16": args.bf16,
                 "target_dropout": args.target_dropout, "draft_lr": args.draft_lr,
                 "draft_objective": args.draft_objective, "align_steps": args.align_steps,
                 "align_weight": args.align_weight, "align_lr": args.align_lr}  # fmt: skip
    cfg = RunConfig(**{**asdict(cfg), **{k: v for k, v in overrides.items() if v is not None}})
    out = args.out or (
        Path(tempfile.mkdtemp(prefix="specviz-tiny-")) if args.smoke else DEFAULT_OUT
    )
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    started = time.perf_counter()
    log(f"output: {out}")

    train_docs, held_docs, corpus = load_corpus(cfg.corpus_docs)
    log(f"corpus: {corpus}")
    t0 = time.perf_counter()
    tok = train_tokenizer(train_docs, cfg.vocab_size)
    tok_s = time.perf_counter() - t0
    eot = tok.token_to_id(EOT)
    train_stream, held_stream = encode_stream(tok, train_docs), encode_stream(tok, held_docs)
    corpus.update(
        train_tokens=len(train_stream),
        heldout_tokens=len(held_stream),
        bytes_per_token=round(corpus["train_bytes"] / len(train_stream), 2),
    )
    log(
        f"tokenizer: {tok.get_vocab_size()} tokens in {tok_s:.1f}s; "
        f"{len(train_stream):,} train / {len(held_stream):,} held-out tokens"
    )
    fast = wrap_tokenizer(tok, cfg.n_positions)

    vocab = tok.get_vocab_size()
    target = make_model(cfg, cfg.target_layers, cfg.target_dim, cfg.target_heads, vocab, eot,
                        cfg.target_dropout)  # fmt: skip
    log(f"target: {target.num_parameters():,} params")
    if args.target_from:  # the same target as that run's (its tokenizer is this one)
        target, target_run = reuse_target(args.target_from, target, out / "target")
    else:
        target_run = train(target, train_stream, cfg, cfg.target_steps, cfg.target_lr, "target",
                           args.seed, held=held_stream)  # fmt: skip
        save_model(target, fast, out / "target")

    draft = make_model(cfg, cfg.draft_layers, cfg.draft_dim, cfg.draft_heads, vocab, eot)
    earlier_draft = None
    if args.draft_from:  # go on from an earlier run's draft (of this target)
        earlier_draft = load_weights(draft, args.draft_from / "draft")
        log(f"draft: starts from {args.draft_from / 'draft'}")
    elif cfg.draft_dim == cfg.target_dim:
        copied = init_draft_from_target(draft, target)
        log(f"draft: initialised from the target's {len(copied)} tensors of the same name")
    if cfg.align_steps:  # the target moves toward what this draft can follow
        draft.eval()
        align_run = train(target, train_stream, cfg, cfg.align_steps, cfg.align_lr, "align",
                          args.seed + 2, held=held_stream, partner=draft)  # fmt: skip
        save_model(target, fast, out / "target")
        target_run = {**target_run, "then_aligned": align_run}
    log(f"draft: {draft.num_parameters():,} params, distilled from the target")
    target.eval()  # the teacher: save_model left it with the fp16-rounded weights it saved
    draft_run = train(draft, train_stream, cfg, cfg.draft_steps, cfg.draft_lr, "draft",
                      args.seed + 1, teacher=target, held=held_stream)  # fmt: skip
    if earlier_draft:
        draft_run = {**draft_run, "started_from": earlier_draft}
    save_model(draft, fast, out / "draft")
    del target, draft

    report = {
        "pair": "tiny",
        "smoke": args.smoke,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python", "scripts/train_tiny.py", *(argv or sys.argv[1:])]),
        "seed": args.seed,
        "threads": args.threads,
        "versions": {
            "python": sys.version.split()[0],
            **{m: __import__(m).__version__ for m in ("torch", "transformers", "tokenizers")},
        },
        "config": asdict(cfg),
        "corpus": {
            "sources": [
                "Debian bible-kjv + bible-kjv-text (KJV, public domain)",
                "Debian fortunes + fortunes-min (BSD)",
            ],
            "heldout": f"every {HOLD_OUT_EVERY}th document (chapter or fortune)",
            **corpus,
        },
        "tokenizer": {"type": "byte-level BPE", "vocab_size": vocab, "special": EOT,
                      "train_s": round(tok_s, 1)},
        **measure(out, held_stream, cfg, {"target": target_run, "draft": draft_run}),
        "total_wall_s": round(time.perf_counter() - started, 1),
    }  # fmt: skip
    (out / "training.json").write_text(json.dumps(report, indent=2) + "\n")
    log(
        f"wrote {out / 'target'}, {out / 'draft'}, {out / 'training.json'} "
        f"in {report['total_wall_s']:.0f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
