"""`specviz lab`: run the accept / reject / resample rule many times at one position and
check that the emitted tokens follow p.

The distributions are the seeds' example by default, numbers given with --p and --q, or
the next-token p and q of a model pair after --prompt. `--gui` opens the lab window.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass

import numpy as np

from specviz.cli.options import UsageError, add_model_args, fail, load_options, model_specs
from specviz.core.engine.threads import set_threads


def add_parser(sub) -> None:
    from specviz.core.lab.rules import MAX_SAMPLES, MIN_SAMPLES, RULES

    parser = sub.add_parser(
        "lab", help="check losslessness: the rule run N times at one position", description=__doc__
    )
    parser.add_argument("--p", help="target distribution, comma-separated (default: the seeds')")
    parser.add_argument("--q", help="draft distribution, comma-separated (default: the seeds')")
    parser.add_argument("--labels", help="token names, comma-separated (default A, B, C, ...)")
    parser.add_argument(
        "--samples",
        type=int,
        default=200_000,
        help=f"runs of the rule ({MIN_SAMPLES:,} to {MAX_SAMPLES:,}, default 200,000)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--rule",
        choices=RULES,
        default="correct",
        help="correct (default), or one of two WRONG rules for contrast",
    )
    seq = parser.add_argument_group(
        "on sequences (K i.i.d. drafted positions a round; every rule on the same draws)"
    )
    seq.add_argument(
        "--k", type=int, help="drafts a round: run the verification rules on rounds of K"
    )
    seq.add_argument(
        "--rules",
        default="all",
        help="comma-separated among token, block, typical (lossy), token-block-residual, "
        "block-token-residual (both WRONG); default all",
    )
    tree = parser.add_argument_group("at a token tree's node (W children from q)")
    tree.add_argument(
        "--width",
        type=int,
        help="children per node: run the multi-draft rules (sample, topk, and two WRONG "
        "variants) at one position",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--gui", action="store_true", help="open the lab window instead")
    add_model_args(parser)
    model = parser.add_argument_group("at a real position (with a model pair)")
    model.add_argument("--prompt", help="the prefix: the lab runs at the next token after it")
    model.add_argument("--temperature", type=float, default=1.0, help="0 = greedy (default 1)")
    model.add_argument("--top-k", type=int, default=0, help="0 = off (default)")
    model.add_argument("--top-p", type=float, default=1.0, help="1.0 = off (default)")


def _numbers(text: str, name: str) -> list[float]:
    try:
        values = [float(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise UsageError(f"--{name} takes numbers separated by commas, got '{text}'") from None
    if len(values) < 2:
        raise UsageError(f"--{name} needs at least two entries, got '{text}'")
    if any(v < 0 or not math.isfinite(v) for v in values):
        raise UsageError(f"--{name} has a negative or non-finite entry: '{text}'")
    if sum(values) <= 0:
        raise UsageError(f"--{name} has no mass: all entries are zero")
    return values


def _teaching(args: argparse.Namespace):
    """(p, q, labels, title) from --p / --q / --labels, or the seeds' example."""
    from specviz.core.lab.distributions import SEED_P, SEED_Q, SEED_TOKENS

    p = _numbers(args.p, "p") if args.p else list(SEED_P)
    q = _numbers(args.q, "q") if args.q else list(SEED_Q)
    if len(p) != len(q):
        raise UsageError(f"--p and --q must have the same length ({len(p)} vs {len(q)})")
    if args.labels:
        labels = [s.strip() for s in args.labels.split(",")]
        if len(labels) != len(p):
            raise UsageError(f"--labels has {len(labels)} names for {len(p)} tokens")
    elif len(p) == len(SEED_TOKENS):
        labels = list(SEED_TOKENS)
    else:
        labels = [chr(ord("A") + i) if i < 26 else f"t{i}" for i in range(len(p))]
    return np.array(p), np.array(q), labels, "teaching example"


def _model_mode(args: argparse.Namespace) -> bool:
    return any(v is not None for v in (args.target, args.draft, args.pair, args.prompt))


def _position(args: argparse.Namespace):
    """The next-token p and q of a model pair after the prompt (loads the models)."""
    from specviz.core.decoding.warp import SamplingConfig
    from specviz.core.lab.position import position_distributions
    from specviz.core.models.pair import ModelLoadError, load_pair

    if args.p or args.q:
        raise UsageError("give either --p/--q or a model pair and --prompt, not both")
    config = SamplingConfig(args.temperature, args.top_k, args.top_p)
    try:
        config.validate()
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.prompt is not None and not args.prompt.strip():
        raise UsageError("the prompt is empty")
    try:
        target, draft = model_specs(args)
    except ImportError:
        raise UsageError("no built-in model pair here: give --target and --draft") from None

    def progress(message: str) -> None:
        print(f"[specviz] {message}", file=sys.stderr, flush=True)

    try:
        set_threads(args.threads)
        pair = load_pair(target, draft, load_options(args), progress=progress)
    except ModelLoadError as e:
        raise UsageError(str(e)) from None
    if args.prompt is None:
        from specviz.core.resources import example_prompts

        args.prompt = example_prompts()[0]
    ids = pair.tokenizer(args.prompt)["input_ids"]
    try:
        pos = position_distributions(pair, ids, config)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return pos, f"after {args.prompt!r} ({target} / {draft})"


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def figures(result, labels, title: str, position=None) -> dict:
    """The JSON object of a run: distributions as lists over the whole vocabulary
    (infinite chi-square, from a token that p gives no mass, is written as null)."""
    from specviz.core.lab.arithmetic import arithmetic
    from specviz.core.lab.rules import RULE_LABELS

    a = arithmetic(result.p, result.q)
    obj = {
        "title": title,
        "rule": result.rule,
        "rule_label": RULE_LABELS[result.rule],
        "samples": result.n,
        "seed": result.seed,
        "labels": list(labels) if labels is not None else None,
        "p": a.p.tolist(),
        "q": a.q.tolist(),
        "alpha": a.alpha,
        "rejection": a.reject,
        "residual": a.residual.tolist(),
        "acceptance_rate": result.acceptance_rate,
        "counts": result.counts.tolist(),
        "empirical": result.empirical.tolist(),
        "tv": result.tv,
        "chi2": _finite(result.chi2),
        "dof": result.dof,
        "p_value": result.p_value,
        "rejects_at_0.001": result.rejects(),
    }
    if position is not None:
        obj["context_len"] = position.context_len
        obj["top"] = [[i, t] for i, t in zip(position.top_ids, position.top_text, strict=True)]
    return obj


def format_text(result, label, title: str) -> str:
    from specviz.core.lab.arithmetic import arithmetic
    from specviz.core.lab.distributions import bar_layout
    from specviz.core.lab.montecarlo import LEVEL
    from specviz.core.lab.rules import RULE_LABELS

    a = arithmetic(result.p, result.q)
    layout = bar_layout(np.maximum(a.p, a.q), label)
    cols = [layout.apply(v) for v in (a.p, a.q, a.overlap, a.excess, a.residual, result.empirical)]
    from specviz.cli.terminal import printable

    names = [printable(s, keep_lines=False) for s in layout.labels]  # a tokenizer's texts
    width = max(8, *(len(s) for s in names))
    head = ["p", "q", "min(p,q)", "max(0,p-q)", "residual", "empirical"]
    lines = [
        f"lab: {printable(title, keep_lines=False)}",
        f"rule: {RULE_LABELS[result.rule]}",
        "",
        f"{'token':<{width}}" + "".join(f"{h:>12}" for h in head),
    ]
    for i, name in enumerate(names):
        lines.append(f"{name:<{width}}" + "".join(f"{c[i]:>12.4f}" for c in cols))
    verdict = (
        "REJECTS 'the emitted tokens follow p'"
        if result.rejects()
        else "consistent with p (does not reject)"
    )
    lines += [
        "",
        f"alpha = sum min(p, q) = {a.alpha:.4f}   1 - alpha = {a.reject:.4f}",
        f"samples {result.n:,}   acceptance rate {result.acceptance_rate:.4f} "
        f"(alpha {a.alpha:.4f})",
        f"TV distance to p {result.tv:.5f}   chi-square {result.chi2:.2f} (dof {result.dof})   "
        f"p-value {result.p_value:.4g}",
        f"at the {LEVEL} level: {verdict}",
    ]
    return "\n".join(lines)


@dataclass(frozen=True)
class LabRequest:
    """What `lab --gui` hands back to the entry point, which opens the lab window on it."""

    p: np.ndarray
    q: np.ndarray
    labels: list[str] | None
    title: str
    position: object | None  # core.lab.position.PositionDistributions at a model position
    given: bool  # p and q came from --p / --q (else the window starts on the seeds')


def run(args: argparse.Namespace) -> int | LabRequest:
    """The exit code; with --gui, a LabRequest for the entry point to open (commands never
    open windows)."""
    from specviz.core.lab.montecarlo import monte_carlo
    from specviz.core.lab.rules import MAX_SAMPLES, MIN_SAMPLES

    if args.k is not None and args.width is not None:
        return fail("give --k (rounds of K positions) or --width (one node's children), not both")
    if args.k is not None:
        return run_sequences(args)
    if args.width is not None:
        return run_multidraft_rules(args)
    try:
        if not MIN_SAMPLES <= args.samples <= MAX_SAMPLES:
            raise UsageError(
                f"--samples must be between {MIN_SAMPLES:,} and {MAX_SAMPLES:,}, "
                f"got {args.samples:,}"
            )
        position = None
        if _model_mode(args):
            position, title = _position(args)
            p, q, labels = position.p, position.q, None
            label = position.label
        else:
            p, q, labels, title = _teaching(args)
            label = labels.__getitem__
    except UsageError as e:
        return fail(str(e))
    if args.gui:
        return LabRequest(p, q, labels, title, position, bool(args.p or args.q))
    try:
        result = monte_carlo(p, q, args.samples, args.rule, args.seed)
    except KeyboardInterrupt:
        return 130
    except ValueError as e:
        return fail(str(e))
    if args.json:
        print(json.dumps(figures(result, labels, title, position), allow_nan=False))
    else:
        print(format_text(result, label, title))
    return 0


def run_sequences(args: argparse.Namespace) -> int:
    """`lab --k K`: every asked rule on the same rounds of K i.i.d. drafts (core.lab.sequence)."""
    from specviz.core.lab.montecarlo import LEVEL
    from specviz.core.lab.sequence import (
        SEQUENCE_LABELS,
        SEQUENCE_RULES,
        blind_spots,
        compare,
        verdict,
    )

    try:
        if _model_mode(args) or args.gui:
            raise UsageError("--k runs on --p and --q (i.i.d. positions), not a model or window")
        p, q, labels, _ = _teaching(args)
        rules = (
            SEQUENCE_RULES
            if args.rules == "all"
            else tuple(r.strip() for r in args.rules.split(","))
        )
        unknown = [r for r in rules if r not in SEQUENCE_RULES]
        if unknown:
            raise UsageError(
                f"--rules: unknown {', '.join(unknown)} (of {', '.join(SEQUENCE_RULES)})"
            )
        results = compare(p, q, args.k, args.samples, args.seed, rules)
    except (UsageError, ValueError) as e:
        return fail(str(e))
    except KeyboardInterrupt:
        return 130
    if args.json:
        obj = {"p": p.tolist(), "q": q.tolist(), "k": args.k, "rounds": args.samples}
        print(json.dumps({**obj, "rules": [r.to_json() for r in results]}, allow_nan=False))
        return 0
    print(f"lab on sequences: K = {args.k}, {args.samples:,} rounds of i.i.d. drafts, same draws")
    print(f"{'rule':<22} {'kept a round [95%]':<26} {'p-value':>10} {'TV':>8}  verdict")
    for r in results:
        lo, hi = r.mean_accepted_ci
        words, tone = verdict(r)
        said = f"REJECTS 'follows p' at {LEVEL}" if tone == "bad" else words
        print(
            f"{r.rule:<22} {r.mean_accepted:.4f} [{lo:.4f}, {hi:.4f}]   {r.p_value:>10.3g} "
            f"{r.tv:>8.4f}  {said}"
        )
    for r in results:
        print(f"  {r.rule}: {SEQUENCE_LABELS[r.rule]}")
    for sentence in blind_spots(results):
        print(f"note: {sentence}")
    return 0


def run_multidraft_rules(args: argparse.Namespace) -> int:
    """`lab --width W`: the multi-draft rules at one node (core.lab.multidraft)."""
    from specviz.core.lab.montecarlo import LEVEL
    from specviz.core.lab.multidraft import MULTI_RULES, WRONG_MULTI, run_multidraft

    try:
        if _model_mode(args) or args.gui or args.k is not None:
            raise UsageError("--width runs on --p and --q, without --k, a model or the window")
        p, q, _, _ = _teaching(args)
        results = [
            run_multidraft(r, p, q, args.width, args.samples, args.seed) for r in MULTI_RULES
        ]
    except (UsageError, ValueError) as e:
        return fail(str(e))
    if args.json:
        obj = {"p": p.tolist(), "q": q.tolist(), "width": args.width, "samples": args.samples}
        print(json.dumps({**obj, "rules": [r.to_json() for r in results]}, allow_nan=False))
        return 0
    print(f"multi-draft at one node: {args.width} children from q, {args.samples:,} nodes")
    for r in results:
        kind = "WRONG " if r.rule in WRONG_MULTI else ""
        verdict = "follows p" if r.lossless else f"REJECTS 'follows p' at {LEVEL}"
        print(f"{kind + r.rule:<22} kept {r.accepted_rate:.4f}  p-value {r.p_value:.3g}  "
              f"TV {r.tv:.4f}  {verdict}")  # fmt: skip
    return 0
