"""`specviz run`: speculative decoding headless, one line per round, a summary, a trace."""

from __future__ import annotations

import argparse
import json
import os
import sys

from specviz.cli import speedup_text
from specviz.cli.drafting_options import add_drafter_options, drafting_from, pair_spec
from specviz.cli.options import (
    UsageError,
    add_model_args,
    add_sampling_args,
    adopt_generation_config,
    fail,
    settings_from,
)
from specviz.cli.session.run_connected import add_connect_args, run_connected
from specviz.cli.session.session_loop import Formats, drive
from specviz.cli.terminal import printable
from specviz.core.engine.threads import set_threads
from specviz.core.models.tensor_parallel import Lockstep, TensorParallelError, tp_context
from specviz.core.resources import read_text_bounded

MARKS = {"accepted": "+", "rejected": "x", "discarded": "-", "resampled": "~", "bonus": "*"}
COLOURS = {
    "accepted": "32",
    "rejected": "31;9",
    "discarded": "90;9",
    "resampled": "33",
    "bonus": "36",
}


def add_parser(sub) -> None:
    parser = sub.add_parser("run", help="run speculative decoding headless", description=__doc__)
    add_model_args(parser)
    add_sampling_args(parser)
    add_drafter_options(parser)
    prompt = parser.add_argument_group("prompt and output")
    prompt.add_argument("--prompt", help="the text to continue")
    prompt.add_argument("--prompt-file", help="read the prompt from a file")
    prompt.add_argument("--trace", help="write the session as a JSON Lines trace")
    prompt.add_argument("--force", action="store_true", help="overwrite an existing trace")
    prompt.add_argument("--quiet", action="store_true", help="print only the summary")
    prompt.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument(
        "--tp-size",
        type=int,
        default=1,
        help="split the target over N processes (tensor parallelism; run under `torchrun "
        "--nproc-per-node N`); rank 0 prints and writes the trace",
    )
    add_connect_args(parser)


def _example_prompt(args: argparse.Namespace, pair) -> str:
    """No --prompt: a chat question for a session in the chat template (an instruct target,
    unless --no-chat), else the text-continuation example (a Bible verse for builtin:tiny)."""
    from specviz.core.models.chat import pair_instruct_reason
    from specviz.core.resources import chat_example_prompts, example_prompts

    chat = (
        args.chat if getattr(args, "chat", None) is not None else bool(pair_instruct_reason(pair))
    )
    prompts = (chat_example_prompts() if chat else []) or example_prompts()
    return prompts[0]


def _prompt(args: argparse.Namespace) -> str | None:
    if args.prompt is not None and args.prompt_file:
        raise UsageError("give either --prompt or --prompt-file, not both")
    if args.prompt_file:
        try:
            text = read_text_bounded(args.prompt_file)
        except UnicodeDecodeError as e:
            raise UsageError(
                f"the prompt file is not UTF-8 text (byte {e.object[e.start]:#04x} at "
                f"offset {e.start})"
            ) from None
        except OSError as e:
            raise UsageError(f"cannot read the prompt file: {e}") from None
    else:
        text = args.prompt
    if text is None:
        return None  # the example prompt for the pair: _example_prompt, once it is loaded
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:  # bytes that were not UTF-8, carried by surrogateescape
        raise UsageError(
            f"the prompt is not UTF-8 text (undecodable byte at character {e.start})"
        ) from None
    if not text.strip():
        raise UsageError("the prompt is empty")
    return text


def _show(token, colour: bool) -> str:
    text = printable(json.dumps(token.text, ensure_ascii=False)[1:-1])
    if colour:
        return f"\x1b[{COLOURS[token.status]}m{text}\x1b[0m"
    return f"{text}{MARKS[token.status]}"


def format_round(rnd, colour: bool = False) -> str:
    tokens = " ".join(_show(t, colour) for t in rnd.tokens)
    return (
        f"round {rnd.index:3d}  ctx {rnd.context_len:4d}  accepted {rnd.n_accepted}/"
        f"{rnd.n_drafted}  {rnd.ms:7.1f} ms  | {tokens}"
    )


def format_summary(s: dict) -> str:
    def f(value, fmt="{:.3f}"):
        return "n/a" if value is None else fmt.format(value)

    return "\n".join(
        [
            f"rounds {s['rounds']}   tokens {s['tokens']}   tokens/forward "
            f"{f(s['tokens_per_forward'], '{:.2f}')}   "
            f"mean accepted {f(s['mean_accepted'], '{:.2f}')}",
            f"acceptance rate {f(s['acceptance_rate'])} (accepted/judged)   draft efficiency "
            f"{f(s['draft_efficiency'])} (accepted/drafted)   alpha {f(s['alpha'])}",
            f"speedup {speedup_text.measured(s)}   "
            f"({f(s['ms_per_token'], '{:.1f}')} ms/token speculative)",
            f"        {speedup_text.predicted(s)}",
            f"        {speedup_text.basis(s)}",
        ]
    )


def _describe_generation_config(config: dict, adopted: dict | None) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in config.items())
    if adopted is None:
        return (
            f"the target's generation_config.json: {shown} (not used; see --use-generation-config)"
        )
    taken = ", ".join(f"{k}={v}" for k, v in adopted.items()) or "nothing"
    return f"the target's generation_config.json: {shown}; adopted {taken}"


class LockstepEngine:
    """A SessionHost whose rounds are checked against rank 0's (tensor_parallel.Lockstep)."""

    def __init__(self, pair, lockstep) -> None:
        from specviz.core.host.session_host import SessionHost

        self._engine, self._lockstep = SessionHost(pair), lockstep

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def run(self, max_rounds: int | None = None):
        for rnd in self._engine.run(max_rounds):
            self._lockstep.check(rnd)
            yield rnd


def run(args: argparse.Namespace) -> int:
    from specviz.core.models.pair import ModelLoadError
    from specviz.core.trace.live_file import check_target

    try:
        settings = settings_from(args)
        prompt = _prompt(args)
        drafter, policy = drafting_from(args)
        spec = pair_spec(args, drafter)
        target, draft = spec.target, spec.draft
        tp = tp_context(args.tp_size, args.device or "cpu")
        if tp is not None and args.connect:
            raise UsageError("--tp-size splits a target loaded here: drop it with --connect")
        if tp is not None and not tp.leader:  # rank 0 alone speaks and writes
            args.trace, args.json, args.quiet = None, False, True
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the life of this rank
        if tp is not None and (args.device or "cpu").startswith("cuda"):
            args.device = f"cuda:{tp.local_rank}"
        if args.trace:
            check_target(args.trace, force=args.force)
        if args.connect:
            if prompt is None:  # the server's pair is not known here
                from specviz.core.resources import example_prompts

                prompt = example_prompts()[0]
            return run_connected(
                args, settings, prompt, (drafter, policy), Formats(format_round, format_summary)
            )
    except (UsageError, OSError, TensorParallelError) as e:
        return fail(str(e))

    def progress(message: str) -> None:
        if tp is None or tp.leader:
            print(f"[specviz] {printable(message)}", file=sys.stderr, flush=True)

    try:
        set_threads(args.threads)
        pair = spec.load(progress)
    except (ModelLoadError, TensorParallelError) as e:
        return fail(str(e))
    if pair.generation_config:
        adopted = None
        if args.use_generation_config:
            from specviz.core.models.generation import generation_settings

            try:
                settings, adopted = adopt_generation_config(
                    settings, generation_settings(pair.generation_config), args
                )
            except UsageError as e:
                return fail(str(e))
        progress(_describe_generation_config(pair.generation_config, adopted))
    elif args.use_generation_config:
        progress("the target has no generation_config.json: the sampling options stand")
    from specviz.core.host.session_host import SessionHost

    prompt = prompt if prompt is not None else _example_prompt(args, pair)
    engine = SessionHost(pair) if tp is None else LockstepEngine(pair, Lockstep(tp))
    return drive(
        engine,
        args,
        prompt,
        settings,
        (drafter, policy),
        Formats(format_round, format_summary),
        names=lambda header: {"target": target, "draft": draft},
    )
