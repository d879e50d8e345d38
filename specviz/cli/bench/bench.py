"""`specviz bench`: configurations side by side on benchmark questions, in Spec-Bench's
table (#MAT with the bonus and alpha, accepted / judged drafts, each with its 95% interval;
accepted per draft position; tokens/s; speedup with its 95% interval), per category and
overall, with the target alone interleaved per question.

Reads Spec-Bench's question.jsonl, MT-Bench's and SPEED-Bench's question files (`turns`,
`category`), or the shipped offline set (resources/prompts/bench.jsonl). Greedy by
default, as Spec-Bench: each question then says whether its text equals the target alone's
and where it first differs. Markdown on stdout by default; --csv FILE (or -) the rows;
--json one object.
"""

from __future__ import annotations

import argparse
import json
import sys

from specviz.cli.drafting_options import add_drafter_params, drafter_params, pair_spec
from specviz.cli.options import UsageError, add_model_args, fail, finite_float, interruptible
from specviz.cli.terminal import printable
from specviz.core.engine.threads import set_threads

DEFAULT_CONFIGS = "model:4,lookup:3"


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "bench",
        help="configurations side by side on Spec-Bench-style questions: #MAT, tokens/s, "
        "speedup per category",
    )
    parser.description = __doc__
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_model_args(parser)
    group = parser.add_argument_group("bench")
    group.add_argument(
        "--questions", metavar="FILE",
        help="a question file, one JSON object a line with 'turns' and 'category' (Spec-Bench's "
        "question.jsonl, MT-Bench, SPEED-Bench); default: the shipped set, "
        "resources/prompts/bench.jsonl",
    )  # fmt: skip
    group.add_argument(
        "--configs", default=DEFAULT_CONFIGS, metavar="DRAFTER:K[+RULE],...",
        help="the configurations, each a drafter of the registry, K and optionally a rule: a "
        "verifier (block) or a token tree (tree2x16: width 2, at most 16 nodes); e.g. "
        f"model:4,lookup:3,model:4+tree2x16 (default {DEFAULT_CONFIGS})",
    )  # fmt: skip
    group.add_argument("--temperature", type=finite_float, default=0.0,
                       help="0 = greedy (default, as Spec-Bench)")  # fmt: skip
    group.add_argument("--top-k", type=int, default=0, help="0 = off (default)")
    group.add_argument("--top-p", type=finite_float, default=1.0, help="1.0 = off (default)")
    group.add_argument("--max-new-tokens", type=int, default=64, help="per turn (default 64)")
    group.add_argument("--seed", type=int, default=0, help="sampling seed and run order")
    group.add_argument("--limit", type=int, help="the first N questions only")
    group.add_argument("--category", action="append", metavar="NAME",
                       help="only questions of this category (repeatable)")  # fmt: skip
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON object")
    out.add_argument("--csv", metavar="FILE", help="write the rows as CSV to FILE (- : stdout)")
    params = parser.add_argument_group("drafter parameters (each configuration takes its own)")
    add_drafter_params(params)


def _settings(args):
    from specviz.core.bench.results import BenchSettings
    from specviz.core.trace.records import Settings

    if args.max_new_tokens < 1 or args.max_new_tokens > 4096:
        raise UsageError("--max-new-tokens must be between 1 and 4096")
    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit must be >= 1")
    return BenchSettings(
        Settings(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                 max_new_tokens=args.max_new_tokens, seed=args.seed)
    )  # fmt: skip


def chat_settings(settings, chat: bool | None, pair):
    """The turns as chat turns as `run` and `tune` take them: --chat / --no-chat, or by
    default for an instruct target (core.models.chat); settings with chat and chat_why."""
    import dataclasses

    from specviz.core.models.chat import pair_instruct_reason

    if chat is None:
        reason = pair_instruct_reason(pair)
        why = f"by default: {reason}" if reason is not None else ""
    else:
        why = "asked for (--chat)" if chat else ""
    return dataclasses.replace(settings, chat=bool(why), chat_why=why)


def _pair_config(args, configs):
    """The configuration that decides which models load: one with a draft model if any."""
    model = [c for c in configs if c.drafter.needs_draft_model]
    if model and args.target and not args.draft:
        raise UsageError(
            f"--configs {model[0].label} needs a draft model: give --draft (or --pair)"
        )
    return (model or list(configs))[0].drafter


def prepare(args):
    """(questions, configs, settings, pair spec), or UsageError / QuestionFileError."""
    from specviz.core.bench.questions import load_questions
    from specviz.core.bench.runs import bench_settings, parse_configs

    settings = _settings(args)
    try:
        configs = parse_configs(args.configs, drafter_params(args))
        for config in configs:
            bench_settings(config, settings).validate()  # sampling values a user can fix
    except ValueError as e:
        raise UsageError(str(e)) from None
    questions = load_questions(args.questions, None if args.category else args.limit)
    if args.category:
        questions = [q for q in questions if q.category in args.category]
        if not questions:
            raise UsageError(f"no question of category {', '.join(args.category)}")
        questions = questions[: args.limit]
    return questions, configs, settings, pair_spec(args, _pair_config(args, configs))


def run(args: argparse.Namespace) -> int:
    from specviz.core.bench.questions import QuestionFileError
    from specviz.core.models.pair import ModelLoadError

    try:
        questions, configs, settings, spec = prepare(args)
        csv_out = _csv_target(args.csv)
    except (UsageError, QuestionFileError) as e:
        return fail(str(e))

    def progress(message: str) -> None:
        print(f"[specviz] {printable(message)}", file=sys.stderr, flush=True)

    try:
        set_threads(args.threads)
        pair = spec.load(progress)
        settings = chat_settings(settings, args.chat, pair)
        if settings.chat:
            from specviz.core.models.chat import render

            render(pair.tokenizer, "a check")  # no template: one line, before any run
            why = settings.chat_why
            progress(f"the turns go through the chat template ({why}; --no-chat: raw)")
        for config in configs:  # a drafter that cannot run on this pair (early-exit layers)
            from specviz.core.drafters.registry import make_drafter

            make_drafter(config.drafter, pair)
    except (ModelLoadError, ValueError) as e:
        return fail(str(e))
    try:
        result = _bench(pair, questions, configs, settings, progress)
    except ModelLoadError as e:  # a chat template that fails on a later turn
        return fail(str(e))
    except ValueError as e:  # a turn too long for the models' context
        return fail(str(e))
    return report(args, result, spec, csv_out)


def _csv_target(path: str | None):
    """--csv: None, "-" or a path whose folder exists (checked before anything loads)."""
    if path is None or path == "-":
        return path
    from pathlib import Path

    folder = Path(path).expanduser().resolve().parent
    if not folder.is_dir():
        raise UsageError(f"--csv: no folder {folder}")
    return path


def _bench(pair, questions, configs, settings, progress):
    """Run it; the first Ctrl-C stops after the round in progress, what finished is kept."""
    from specviz.core.bench.results import BenchResult
    from specviz.core.bench.runs import run_bench

    runs = []

    def on_run(done, total, run):
        runs.append(run)
        progress(
            f"run {done}/{total}: question {questions[run.question].question_id} "
            f"({run.category}), {run.config}: {run.tokens} tokens in {run.seconds:.2f} s"
        )

    return interruptible(
        lambda cancel: run_bench(pair, questions, configs, settings, cancel, on_run),
        progress,
        lambda: BenchResult(runs, tuple(configs), tuple(questions), settings, cancelled=True),
    )


def result_json(result, spec) -> dict:
    from specviz.core.bench.table import bench_rows, question_lines

    s, session = result.settings, result.settings.settings
    return {
        "pair": {"target": spec.target, "draft": spec.draft},
        "settings": {
            **{n: getattr(session, n) for n in ("temperature", "top_k", "top_p")},
            "max_new_tokens": session.max_new_tokens, "seed": session.seed, "chat": s.chat,
            "chat_why": s.chat_why or None,
        },
        "configs": [c.label for c in result.configs],
        "rows": [r.to_json() for r in bench_rows(result)],
        "questions": [q.to_json() for q in question_lines(result)],
        "cancelled": result.cancelled,
        "completed": len(result.runs),
        "planned": len(result.questions) * (len(result.configs) + 1),
    }  # fmt: skip


def report(args, result, spec, csv_out) -> int:
    from specviz.cli.bench.bench_text import csv_text, markdown  # the table's modules: torch
    from specviz.core.bench.table import bench_rows, question_lines

    rows = bench_rows(result)
    if csv_out is not None:
        text = csv_text(rows)
        if csv_out == "-":
            sys.stdout.write(text)
        else:
            try:
                with open(csv_out, "w", encoding="utf-8", newline="") as f:
                    f.write(text)
            except OSError as e:
                return fail(f"--csv: cannot write {csv_out} ({e.strerror or e})")
    if args.json:
        print(json.dumps(result_json(result, spec)))
    elif csv_out != "-":
        print(markdown(result, rows, question_lines(result), spec))
    return 130 if result.cancelled else 0
