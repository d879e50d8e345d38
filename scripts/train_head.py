#!/usr/bin/env python
"""Train an EAGLE-3 head for a built-in pair's target on data it wrote itself
(scripts/head_data.py), and save it in the speculators format.

The recipe is speculators' (`Eagle3DraftModel.forward`): training-time test over `--ttt`
steps (step s feeds the head its own output states from step s-1 and sees, besides the
context, only its own earlier steps at the same position), the loss at every step the KL
divergence from the target's distribution (recomputed from the stored final state, over the
draft vocabulary) to the head's; the target's embeddings and its head (restricted to a draft
vocabulary of the `--draft-vocab` most frequent answer tokens: d2t/t2d) stay frozen.

Runs fit a session: `--minutes` stops at a time budget, a checkpoint (model, optimizer,
step, data order) is written every `--save-every` steps and at the end, and a run resumes
from it by itself.

    python scripts/train_head.py --data /work/data/chat --out /work/data/head-smollm2 --epochs 4
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import random
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import torch
import transformers

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from specviz.core.drafters.eagle3_fit import ttt_passes  # noqa: E402
from specviz.core.drafters.eagle3_format import save_head  # noqa: E402
from specviz.core.drafters.eagle3_head import Eagle3Head, HeadConfig  # noqa: E402


def log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def load_shards(folder: Path) -> list[dict]:
    seqs = []
    for path in sorted(folder.glob("shard-*.pt")):
        seqs += torch.load(path, weights_only=False)
    return seqs


def draft_vocab(seqs, size: int, vocab: int, always: tuple[int, ...]) -> torch.Tensor:
    """The `size` most frequent target ids in the sequences (ids in `always` kept), sorted."""
    if size >= vocab:
        return torch.arange(vocab)
    counts = Counter()
    for s in seqs:
        counts.update(s["ids"].tolist())
    chosen = list(dict.fromkeys(t for t in always if t < vocab))
    for token, _ in counts.most_common():
        if len(chosen) >= size:
            break
        if token not in chosen:
            chosen.append(token)
    for token in range(vocab):  # a tiny corpus: fill up with unseen ids
        if len(chosen) >= size:
            break
        if token not in chosen:
            chosen.append(token)
    return torch.tensor(sorted(chosen))


def head_config(target_config, layers, draft: int, ttt: int) -> HeadConfig:
    from transformers import LlamaConfig

    hidden = target_config.hidden_size
    heads = getattr(target_config, "num_attention_heads", None) or target_config.n_head
    kv = getattr(target_config, "num_key_value_heads", None) or heads
    inter = getattr(target_config, "intermediate_size", None) or 4 * hidden
    layer = LlamaConfig(hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv,
                        head_dim=hidden // heads, intermediate_size=inter, num_hidden_layers=1,
                        vocab_size=target_config.vocab_size,
                        rms_norm_eps=getattr(target_config, "rms_norm_eps", 1e-5),
                        max_position_embeddings=8192,
                        rope_parameters=getattr(target_config, "rope_parameters", None)
                        or {"rope_type": "default", "rope_theta": 10000.0})  # fmt: skip
    return HeadConfig(layer=layer, aux_layers=tuple(layers), draft_vocab=draft,
                      target_vocab=target_config.vocab_size, target_hidden=hidden,
                      norm_before_residual=False, speculative_tokens=ttt)  # fmt: skip


def batches(seqs, pack: int, rng: random.Random):
    """Lists of sequences of about `pack` tokens in all, in a shuffled order."""
    order = list(range(len(seqs)))
    rng.shuffle(order)
    batch, size = [], 0
    for i in order:
        n = len(seqs[i]["ids"]) - 1
        if batch and size + n > pack:
            yield batch
            batch, size = [], 0
        batch.append(seqs[i])
        size += n
    if batch:
        yield batch


def ttt_loss(head, batch, embed, target_rows, ttt: int, decay: float):
    """(loss, [agreement at each step]) of a packed batch: speculators' shifted pairs
    (x_{t+1}, h_t) -> the target's p at t+1, then ttt - 1 steps on the head's own states
    (core.drafters.eagle3_fit.ttt_passes, which check-head measures with too)."""
    ids = torch.cat([s["ids"][1:].long() for s in batch])  # [T] x_{t+1}
    aux = torch.cat([s["aux"][:-1] for s in batch]).float()  # [T, n*H] h_t
    last = torch.cat([s["last"][1:] for s in batch]).float()  # [T, H] target at t+1
    doc = torch.cat([torch.full((len(s["ids"]) - 1,), i) for i, s in enumerate(batch)])
    pos = torch.cat([torch.arange(1, len(s["ids"])) for s in batch])  # [T]
    # the token predicted at index t (step 0) is x_{t+2}: in the answer when t + 2 >= start
    answer = torch.cat([torch.arange(len(s["ids"]) - 1) + 2 >= s["start"] for s in batch])
    n = ids.shape[0]
    with torch.no_grad():  # [T, Vd], at the rows some step scores (answer[t] onwards)
        logp_target = torch.zeros(n, target_rows.shape[0])
        logp_target[answer] = torch.log_softmax((last[answer] @ target_rows.T).float(), -1)
    loss, agree = 0.0, []
    for s, out in enumerate(ttt_passes(head, embed, ids, aux, pos, doc, ttt)):
        # row t predicts x_{t+2+s}: the target's p at index t + s, same document; only the
        # rows scored go through lm_head (the prompt's are a third of a chat's)
        valid = torch.zeros(n, dtype=torch.bool)
        valid[: n - s] = (doc[s:] == doc[: n - s]) & answer[s:]
        rows = valid.nonzero()[:, 0]
        lp = torch.log_softmax(head.logits(out[rows]).float(), -1)
        tp = logp_target[rows + s]
        kl = (tp.exp() * (tp - lp)).sum(-1).mean()
        loss = loss + (decay**s) * kl
        agree.append(float((lp.argmax(-1) == tp.argmax(-1)).float().mean()))
    return loss, agree


def batch_stream(seqs, pack: int, seed: int, total: int, start: int = 0):
    """Batches `start` to `total`, epoch after epoch, each epoch its own shuffle and so its
    own count of batches (not the first epoch's: counting steps by it once looped for ever);
    a resumed run starts at the step it had reached, on the same order."""
    stream = (batch for epoch in itertools.count()
              for batch in batches(seqs, pack, random.Random(seed + epoch)))  # fmt: skip
    return itertools.islice(stream, start, total)


def evaluate(head, seqs, embed, target_rows, ttt: int, pack: int) -> list[float]:
    head.eval()
    totals = [0.0] * ttt
    count = 0
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        for batch in batches(seqs, pack, random.Random(0)):
            _, agree = ttt_loss(head, batch, embed, target_rows, ttt, 1.0)
            totals = [t + a for t, a in zip(totals, agree, strict=True)]
            count += 1
    head.train()
    return [round(t / max(count, 1), 4) for t in totals]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--draft-vocab", type=int, default=8192)
    ap.add_argument("--ttt", type=int, default=3, help="training-time test steps (>= 3)")
    ap.add_argument("--decay", type=float, default=0.8, help="loss weight decay per step")
    ap.add_argument("--epochs", type=float, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--pack", type=int, default=1024, help="tokens per step")
    ap.add_argument("--eval-seqs", type=int, default=96, help="held-out sequences")
    ap.add_argument("--minutes", type=float, default=60, help="stop (and save) after this")
    ap.add_argument("--save-every", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-lm-head", action="store_true",
                    help="store no lm_head (loaders take the target rows by d2t)")  # fmt: skip
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    meta = json.loads((args.data / "meta.json").read_text())
    from transformers import AutoConfig, AutoModelForCausalLM

    target = AutoModelForCausalLM.from_pretrained(meta["target"], dtype=torch.float32)
    embed = target.get_input_embeddings().weight.detach()  # [V, H] frozen
    lm_rows = target.get_output_embeddings().weight.detach()
    target_config = AutoConfig.from_pretrained(meta["target"])
    seqs = load_shards(args.data)
    held, train = seqs[-args.eval_seqs :], seqs[: -args.eval_seqs]
    eos = target_config.eos_token_id
    tids = draft_vocab(train, args.draft_vocab, target_config.vocab_size,
                       tuple(i for i in (eos, 0, 1, 2) if isinstance(i, int)))  # fmt: skip
    answer_tokens = sum(len(s["ids"]) - s["start"] for s in train)
    covered = sum(int(torch.isin(s["ids"][s["start"] :], tids).sum()) for s in held)
    held_tokens = sum(len(s["ids"]) - s["start"] for s in held)
    config = head_config(target_config, meta["layers"], len(tids), args.ttt)
    head = Eagle3Head(config)
    head.d2t.copy_(tids - torch.arange(len(tids)))
    head.lm_head.weight.data.copy_(lm_rows[tids])
    head.lm_head.weight.requires_grad_(False)
    target_rows = lm_rows[tids]  # [Vd, H] the target's logits over the draft vocabulary
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0, betas=(0.9, 0.95))
    steps_per_epoch = sum(1 for _ in batches(train, args.pack, random.Random(0)))
    total = max(1, int(steps_per_epoch * args.epochs))
    args.out.mkdir(parents=True, exist_ok=True)
    ckpt = args.out / "checkpoint.pt"
    step, history, seconds = 0, [], 0.0
    if ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        head.load_state_dict(state["head"])
        opt.load_state_dict(state["opt"])
        step, history, seconds = state["step"], state["history"], state["seconds"]
        log(f"resumed at step {step}/{total}")
    log(f"{len(train)} training sequences ({answer_tokens} answer tokens), {len(held)} "
        f"held out; draft vocabulary {len(tids)} covers {covered / max(held_tokens, 1):.3f} "
        f"of held-out answer tokens; {steps_per_epoch} steps an epoch, {total} in all")  # fmt: skip

    def spent() -> float:  # training seconds over every run of this checkpoint
        return seconds + time.perf_counter() - start_wall

    def save() -> None:  # a killed run's time is kept up to its last save
        tmp = ckpt.with_suffix(".tmp")
        torch.save({"head": head.state_dict(), "opt": opt.state_dict(), "step": step,
                    "history": history, "seconds": spent()}, tmp)  # fmt: skip
        os.replace(tmp, ckpt)

    head.train()
    start_wall = time.perf_counter()
    for batch in batch_stream(train, args.pack, args.seed, total, start=step):
        lr = args.lr * min(1.0, (step + 1) / 20) * (0.1 + 0.9 * 0.5 * (1 + math.cos(
            math.pi * step / total)))  # fmt: skip
        for g in opt.param_groups:
            g["lr"] = lr
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss, agree = ttt_loss(head, batch, embed, target_rows, args.ttt, args.decay)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        if step % 10 == 0:
            log(f"step {step}/{total} loss {float(loss.detach()):.3f} agree "
                + " ".join(f"{a:.2f}" for a in agree))  # fmt: skip
        if step % args.save_every == 0:
            history.append({"step": step, "loss": round(float(loss.detach()), 4),
                            "seconds": round(spent(), 1)})  # fmt: skip
            save()
        if (time.perf_counter() - t0) / 60 > args.minutes:
            break
    save()
    seconds = spent()
    held_agree = evaluate(head, held, embed, target_rows, args.ttt, args.pack)
    log(f"held-out agreement with the target's argmax by step: {held_agree}")
    out = args.out / "eagle3"
    save_head(head, out, verifier=f"builtin:{meta['pair']}", with_lm_head=not args.no_lm_head,
              verifier_architectures=tuple(target_config.architectures or ()))  # fmt: skip
    shards = sorted(args.data.glob("shard-*.pt"))
    report = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "python scripts/train_head.py " + " ".join(sys.argv[1:] if argv is None
                                                              else argv),
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__},
        "data": {**meta, "shards": len(shards), "sequences": len(seqs)},
        "pair": meta["pair"], "layers": meta["layers"], "steps": step, "total_steps": total,
        "finished": step >= total, "train_seconds": round(seconds, 1),
        "train_sequences": len(train), "answer_tokens": answer_tokens,
        "heldout_sequences": len(held), "draft_vocab": len(tids),
        "draft_vocab_coverage": round(covered / max(held_tokens, 1), 4),
        "heldout_agreement_by_step": held_agree, "history": history,
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "params": sum(p.numel() for p in head.parameters()),
        "trainable_params": sum(p.numel() for p in params),
    }  # fmt: skip
    for where in (args.out, out):  # beside the checkpoint, and in the head's folder
        (where / "training.json").write_text(json.dumps(report, indent=1) + "\n")
    log(f"saved {out} ({'finished' if step >= total else 'stopped at the time budget'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
