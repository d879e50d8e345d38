"""Frequency-pruned draft vocabularies of a built-in EAGLE-3 head, without retraining: each
keeps the head's most used draft tokens (counted in token-id shards of the target's own
chats, e.g. scripts/head_data.py's, written apart from the held-out questions: each token's
uses plus its expected uses, the target's probability of it summed over the answer
positions, which ranks the tokens a small sample never shows), slices
lm_head's rows and d2t (core.drafters.eagle3.head.prune_draft_vocab) and is written as a
head folder (the cost side: benchmarks/head_step.py --head PAIR=DIR).

The acceptance side is check-head's (`specviz check-head`: the target's greedy answers to the
held-out questions, the head's greedy drafts over them teacher forced, core.drafters.
eagle3.fit.fit) on the same answers for every size: per draft position the acceptance given
the earlier drafts, the simulated #MAT at K (1 + the expected accepted drafts, the bonus
counted), the first draft's expected acceptance at T 1, and the share of the answers' tokens
the vocabulary holds. Sizes are paired on the same positions: the #MAT ratio to the full
vocabulary comes with a 95% bootstrap interval over the questions. Not a test.

    python scripts/head_data.py --pair smollm2 --out /tmp/chat --shards 3 --batch 64 --seed 11
    python benchmarks/head_vocab.py --counts /tmp/chat --sizes 4096,8192,12288 --out /tmp/pruned
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from specviz.core.bench.questions import load_questions  # noqa: E402
from specviz.core.drafters.eagle3.fit import fit  # noqa: E402
from specviz.core.drafters.eagle3.format import save_head  # noqa: E402
from specviz.core.drafters.eagle3.head import prune_draft_vocab  # noqa: E402
from specviz.core.drafters.registry import DrafterConfig, make_drafter  # noqa: E402
from specviz.core.engine.threads import set_threads  # noqa: E402
from specviz.core.models.builtin import resources_dir  # noqa: E402
from specviz.core.models.chat import render  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402
from specviz.core.training.sources import read_id_shards  # noqa: E402


def answer_counts(folder: Path, target, vocab: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Over the shards' answers: ([vocab] how often each target id occurs, [vocab] its
    expected count, the sum of the target's probability of it at every answer position,
    tokens counted). The expected counts rank the tokens a small sample never shows by how
    likely the target finds them."""
    _, docs = read_id_shards(folder)
    counts = torch.zeros(vocab, dtype=torch.long)
    expected = torch.zeros(vocab, dtype=torch.float64)
    total = 0
    for doc in docs:
        ids = torch.as_tensor(list(doc.ids), dtype=torch.long)
        answer = ids[doc.start :]
        counts += torch.bincount(answer, minlength=vocab)[:vocab]
        total += answer.numel()
        with torch.inference_mode():
            logits = target(input_ids=ids[None, :-1]).logits[0, doc.start - 1 :, :vocab]
            expected += logits.float().softmax(-1).sum(0).double()  # [vocab]
    return counts, expected, total


def answers(pair, questions: Path, tokens: int) -> tuple[list[list[int]], list[int]]:
    """check-head's sequences: each question in the chat template and the target's greedy
    answer of `tokens` tokens; (sequences, where each answer starts)."""
    prompts = [q.turns[0] for q in load_questions(questions)]
    sequences, starts = [], []
    for prompt in prompts:
        ids = pair.tokenizer(render(pair.tokenizer, prompt), add_special_tokens=False)
        ids = ids["input_ids"][-2048:]
        with torch.inference_mode():
            tensor = torch.tensor([ids])
            out = pair.target.generate(tensor, attention_mask=torch.ones_like(tensor),
                                       max_new_tokens=tokens, do_sample=False,
                                       pad_token_id=pair.eos_token_id)  # fmt: skip
        sequences.append(out[0].tolist())
        starts.append(len(ids))
    return sequences, starts


def simulated_mat(rates) -> float:
    """1 + expected accepted greedy drafts of a round of len(rates) (the bonus counted)."""
    total, run = 1.0, 1.0
    for a in rates:
        run *= a
        total += run
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pair", default="smollm2")
    parser.add_argument("--counts", type=Path, required=True, help="token-id shards to count")
    parser.add_argument("--sizes", default="4096,8192,12288")
    parser.add_argument("--out", type=Path, required=True, help="writes OUT/vocab-N heads")
    parser.add_argument(
        "--questions",
        type=Path,
        default=None,
        help="held-out questions (default resources/prompts/chat.jsonl)",
    )
    parser.add_argument("--tokens", type=int, default=64, help="answer tokens per question")
    parser.add_argument("--steps", type=int, default=4, help="draft positions (K)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    set_threads(None)
    name = f"builtin:{args.pair}"
    pair = load_pair(name, None, dtype="float32")
    drafter = make_drafter(DrafterConfig("eagle3"), pair)
    head, embed = drafter.head, drafter.embed
    to_target = head.draft_to_target  # [Vd]
    counts, expected, counted = answer_counts(args.counts, pair.target, pair.vocab_size)
    used = counts[to_target]  # [Vd] uses of each draft id
    # ranked by uses plus expected uses (ties, if any: the lower draft id)
    rank = used.double() + expected[to_target]
    order = torch.sort(rank, descending=True, stable=True).indices
    questions = args.questions or resources_dir() / "prompts" / "chat.jsonl"
    sequences, starts = answers(pair, questions, args.tokens)
    held = torch.tensor([t for s, st in zip(sequences, starts, strict=True) for t in s[st:]])
    rows, per_question = [], {}
    for size in sorted(int(s) for s in args.sizes.split(",")):
        keep = order[:size]
        pruned = head if size >= head.config.draft_vocab else prune_draft_vocab(head, keep)
        folder = args.out / f"vocab-{size}"
        save_head(pruned, folder, verifier=name, with_lm_head=False)
        kept_ids = set(pruned.draft_to_target.tolist())
        fits = [
            fit(pruned, embed, pair.target, [seq], [start], args.steps, shifts=(0,))[0]
            for seq, start in zip(sequences, starts, strict=True)
        ]  # per question
        per_question[size] = fits
        rates = pooled_rates(fits, range(len(fits)), args.steps)
        rows.append({
            "draft_vocab": size, "head": str(folder),
            "acceptance": [round(float(a), 4) for a in rates],
            "simulated_mat": round(simulated_mat(rates), 4),
            "expected_first": round(float(torch.cat([f.first for f in fits]).mean()), 4),
            "coverage_counted": round(float(used[keep].sum()) / max(counted, 1), 4),
            "coverage_heldout": round(sum(int(t) in kept_ids for t in held.tolist())
                                      / max(len(held), 1), 4),
        })  # fmt: skip
    full = max(per_question)
    rng = np.random.default_rng(0)
    for row in rows:
        row["mat_ratio"] = mat_ratio(per_question[row["draft_vocab"]], per_question[full],
                                     args.steps, rng)  # fmt: skip
    report = {"pair": name, "counted_tokens": counted, "questions": str(questions),
              "answer_tokens": len(held), "steps": args.steps, "rows": rows}  # fmt: skip
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(
        f"{name}: counted {counted} answer tokens in {args.counts}; held out: {len(held)} "
        f"answer tokens of {len(sequences)} questions ({questions.name}), K {args.steps}"
    )
    print(f"{'Vd':>6} {'coverage':>9} {'held-out':>9} {'acceptance by position':>28} "
          f"{'#MAT':>6} {'E[first]':>9} {'#MAT / full [95%]':>24}")  # fmt: skip
    for r in rows:
        acc = " ".join(f"{a:.3f}" for a in r["acceptance"])
        m = r["mat_ratio"]
        print(f"{r['draft_vocab']:>6} {r['coverage_counted']:>9.3f} {r['coverage_heldout']:>9.3f} "
              f"{acc:>28} {r['simulated_mat']:>6.3f} {r['expected_first']:>9.3f} "
              f"{m['ratio']:>8.3f} [{m['low']:.3f}, {m['high']:.3f}]")  # fmt: skip
    return 0


def pooled_rates(fits, index, steps: int) -> np.ndarray:
    """[steps] acceptance per draft position over the questions in index (each question's
    hits and counts summed)."""
    hits, counts = np.zeros(steps), np.zeros(steps)
    for i in index:
        c = np.array(fits[i].counted, dtype=float)
        hits += np.array(fits[i].acceptance) * c
        counts += c
    return np.divide(hits, counts, out=np.zeros(steps), where=counts > 0)


def mat_ratio(sizes, fulls, steps: int, rng, n: int = 2000) -> dict:
    """Simulated #MAT of one size over that of the full vocabulary, pooled over questions,
    with a 95% bootstrap interval over questions (both sizes on the same resample)."""

    def pooled(fits, index) -> float:
        return simulated_mat(pooled_rates(fits, index, steps))

    everyone = range(len(sizes))
    ratio = pooled(sizes, everyone) / pooled(fulls, everyone)
    boot = []
    for _ in range(n):
        index = rng.integers(0, len(sizes), len(sizes))
        boot.append(pooled(sizes, index) / pooled(fulls, index))
    return {"ratio": round(ratio, 4), "low": round(float(np.percentile(boot, 2.5)), 4),
            "high": round(float(np.percentile(boot, 97.5)), 4)}  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
