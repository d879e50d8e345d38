"""`specviz run --connect HOST:PORT --token T`: the same run, on a `specviz serve` engine.

It prints and writes what a local run does (the rounds, the summary, the trace written a
round at a time to NAME.partial.jsonl), from the records the server sends. If the
connection is lost, the rounds received are kept: summarised, written to the trace, and
said so; the exit code is then 1.
"""

from __future__ import annotations

import argparse
import os

from specviz.cli.options import UsageError, fail
from specviz.cli.session_loop import Formats, drive


def add_connect_args(
    parser: argparse.ArgumentParser,
    title: str = "remote engine (see `specviz serve`)",
    timeout: bool = True,
) -> argparse._ArgumentGroup:
    """--connect and --token (and `run`'s --timeout), for `run` and the window (cli.py): one
    definition. Returns the group, for a command's own options beside them."""
    group = parser.add_argument_group(title)
    group.add_argument(
        "--connect", metavar="HOST:PORT", help="drive a `specviz serve` engine (its models)"
    )
    group.add_argument("--token", help="the token `specviz serve` printed ($SPECVIZ_TOKEN)")
    if timeout:
        group.add_argument(
            "--timeout",
            type=float,
            default=600.0,
            help="seconds to wait for any one answer of the server (default 600)",
        )
    return group


def connect_token(args: argparse.Namespace) -> str | None:
    return args.token or os.environ.get("SPECVIZ_TOKEN")


def connect_problem(args: argparse.Namespace) -> str | None:
    """Why args.connect cannot be followed (a bad address, models named, no token), or None."""
    from specviz.remote.client import parse_address

    try:
        parse_address(args.connect)
    except ValueError as e:
        return str(e)
    if args.target or args.draft or getattr(args, "pair", None):
        return "with --connect the server's models are used: drop --target/--draft/--pair"
    if not connect_token(args):
        return "--connect needs --token (the one `specviz serve` printed) or $SPECVIZ_TOKEN"
    return None


def _connect(args: argparse.Namespace):
    from specviz.remote.client import RemoteEngine

    problem = connect_problem(args)
    if problem:
        raise UsageError(problem)
    if args.use_generation_config:
        raise UsageError("--use-generation-config is not available with --connect")
    if not args.timeout > 0:
        raise UsageError(f"--timeout must be > 0, got {args.timeout}")
    return RemoteEngine(args.connect, connect_token(args), reply_timeout=args.timeout)


def run_connected(
    args: argparse.Namespace, settings, prompt: str, drafting: tuple, formats: Formats
) -> int:
    """cli/run.py's run, whose formats it is given, on the engine at args.connect (the one
    loop: cli.session_loop.drive)."""
    from specviz.remote.protocol import RemoteError

    try:
        remote = _connect(args)
    except (UsageError, ValueError) as e:
        return fail(str(e))
    except RemoteError as e:
        return fail(f"cannot connect: {e}")
    return drive(
        remote,
        args,
        prompt,
        settings,
        drafting,
        formats,
        names=lambda header: {"target": header.target.name, "draft": header.draft.name},
        lost_errors=(RemoteError,),
    )
