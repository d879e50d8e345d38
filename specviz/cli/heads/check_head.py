"""`specviz check-head HEAD --target T`: does an EAGLE-3 head fit this target, on its layers?

The target writes its own greedy answer to each prompt; the head drafts over it (teacher
forced, as training-time test runs: core.drafters.eagle3.fit) and the acceptance of its
greedy drafts is measured per draft position, with the head's aux layer ids and with each
shifted by -1 and +1. The shift that keeps most drafts is named: `best_shift` 0 is a head on
the layers it says; -1 or +1 is a config whose ids are off by one.
"""

from __future__ import annotations

import argparse
import json

from specviz.cli.options import threads_arg
from specviz.cli.terminal import printable

MAX_STEPS = 16
MAX_TOKENS = 512


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "check-head",
        help="measure how well an EAGLE-3 head fits a target, on which layers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("head", metavar="HEAD", help="a head folder (speculators format), a "
                        "hub id, or a built-in pair's (builtin:tiny, builtin:smollm2)")  # fmt: skip
    parser.add_argument("--target", default=None, metavar="T",
                        help="the target model: a folder, a hub id or builtin:NAME (default: "
                        "the built-in pair HEAD names)")  # fmt: skip
    parser.add_argument("--prompts", default=None, metavar="F",
                        help="questions (Spec-Bench's question.jsonl format: each one's first "
                        "turn; default: resources/prompts/chat.jsonl, or bench.jsonl for a "
                        "target with no chat template)")  # fmt: skip
    parser.add_argument("--steps", type=int, default=4, help="draft positions measured (K)")
    parser.add_argument("--tokens", type=int, default=64,
                        help="answer tokens the target writes per prompt")  # fmt: skip
    parser.add_argument("--no-chat", action="store_true",
                        help="plain-text prompts for a target with a chat template")  # fmt: skip
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=threads_arg,
                        help="torch's intra-op threads (default: one per core but one, as the "
                        "engine: see core.engine.threads)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from specviz.cli.options import fail

    if not 1 <= args.steps <= MAX_STEPS:
        return fail(f"--steps must be in 1..{MAX_STEPS}")
    if not 1 <= args.tokens <= MAX_TOKENS:
        return fail(f"--tokens must be in 1..{MAX_TOKENS}")
    target = args.target or (args.head if args.head.startswith("builtin:") else None)
    if target is None:
        return fail("give the target the head was trained for: --target T")
    from specviz.core.engine.threads import set_threads

    set_threads(args.threads)
    try:
        report = measure(args, target)
    except (ValueError, OSError) as e:  # ModelLoadError, PromptSetError, HeadError
        return fail(str(e))
    if args.json:
        print(json.dumps(report))
    else:
        print(describe(report))
    return 0


def measure(args: argparse.Namespace, target: str) -> dict:
    from specviz.core.bench.questions import load_questions
    from specviz.core.drafters.eagle3.fit import CLEAR, best, fit, greedy_answers, z_score
    from specviz.core.drafters.registry import DrafterConfig, make_drafter
    from specviz.core.models.builtin import resources_dir
    from specviz.core.models.chat import render
    from specviz.core.models.pair import load_pair

    pair = load_pair(target, None, device=args.device)
    head = args.head
    drafter = make_drafter(DrafterConfig("eagle3", head=head), pair)
    chat = bool(getattr(pair.tokenizer, "chat_template", None)) and not args.no_chat
    default = resources_dir() / "prompts" / ("chat.jsonl" if chat else "bench.jsonl")
    prompts = [q.turns[0] for q in load_questions(args.prompts or default)]
    texts = [render(pair.tokenizer, p) if chat else p for p in prompts]
    ids = [pair.tokenizer(t, add_special_tokens=not chat)["input_ids"][-2048:] for t in texts]
    sequences = greedy_answers(pair.target, ids, args.tokens, pair.eos_token_id)
    starts = [len(p) for p in ids]
    fits = fit(drafter.head, drafter.embed, pair.target, sequences, starts, args.steps)
    top = best(fits)
    own = next(f for f in fits if f.shift == 0)
    z = z_score(top, own) if top.shift != 0 else 0.0
    return {
        "head": head,
        "target": pair.target_info.name,
        "layers": list(drafter.config.aux_layers),
        "prompts": len(prompts),
        "chat": chat,
        "best_shift": top.shift,
        "z": round(z, 2),  # paired, best against the configured ids at position 1
        "clear": top.shift != 0 and z >= CLEAR,
        "shifts": [f.to_json() for f in fits],
        "notes": list(drafter.notes),
    }


def describe(report: dict) -> str:
    from specviz.core.drafters.eagle3.fit import CLEAR

    lines = [
        f"head {printable(report['head'])} on {printable(report['target'])}: aux layers "
        f"{report['layers']}, {report['prompts']} prompts"
        f"{' in the chat template' if report['chat'] else ''}, the target's greedy answers",
        "acceptance of the head's greedy drafts at each position (given the earlier ones):",
    ]
    for f in report["shifts"]:
        name = f"shift {f['shift']:+d}"
        if f["layers"] is None:
            lines.append(f"  {name}: a layer id falls outside the target")
            continue
        rates = "  ".join(f"{a:.2f}" for a in f["acceptance"])
        lines.append(f"  {name} {f['layers']}: {rates}   {f['mean_accepted']:.2f} accepted "
                     f"per round of {len(f['acceptance'])}; the first's expected "
                     f"acceptance at T 1 {f['expected_first']:.2f}")  # fmt: skip
    shift = report["best_shift"]
    if shift == 0:
        lines.append("best_shift 0: the head fits the layers it names")
    elif report["clear"]:
        lines.append(f"best_shift {shift:+d}: the head fits the layers its config names, each "
                     f"shifted by {shift:+d} (paired z {report['z']:.1f} on the first drafts' "
                     "expected acceptance); eagle_aux_hidden_state_layer_ids may be off by "
                     "one")  # fmt: skip
    else:
        lines.append(f"best_shift {shift:+d}, but not clearly (paired z {report['z']:.1f} < "
                     f"{CLEAR}): measure on more text (--prompts, --tokens)")  # fmt: skip
    lines += [f"warning: {printable(n)}" for n in report["notes"]]
    return "\n".join(lines)
