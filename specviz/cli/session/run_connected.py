"""`specviz run --connect HOST:PORT --token-file F`: the same run, on a `specviz serve` engine.

It prints and writes what a local run does (the rounds, the summary, the trace written a
round at a time to NAME.partial.jsonl), from the records the server sends. If the
connection is lost, the rounds received are kept: summarised, written to the trace, and
said so; the exit code is then 1.
"""

from __future__ import annotations

import argparse

from specviz.cli.options import UsageError, fail
from specviz.cli.session.session_loop import Formats, drive


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
    group.add_argument(
        "--token-file",
        metavar="PATH",
        help="the file `specviz serve` wrote its token to (mode 0600), else $SPECVIZ_TOKEN",
    )
    group.add_argument("--token", help=argparse.SUPPRESS)  # refused: see ARGV_REFUSED
    if timeout:
        group.add_argument(
            "--timeout",
            type=float,
            default=600.0,
            help="seconds to wait for any one answer of the server (default 600)",
        )
    return group


def connect_token(args: argparse.Namespace) -> str | None:
    """--token-file's token, else $SPECVIZ_TOKEN's; UsageError for --token (a command line
    is readable by every local user) or a token file that cannot be used."""
    from specviz.remote.token_file import ARGV_REFUSED, TokenError, client_token

    if getattr(args, "token", None):
        raise UsageError(ARGV_REFUSED)
    try:
        return client_token(getattr(args, "token_file", None))
    except TokenError as e:
        raise UsageError(str(e)) from None


def connect_problem(args: argparse.Namespace) -> str | None:
    """Why args.connect cannot be followed (a bad address, models named, no token), or None."""
    from specviz.remote.client import parse_address

    try:
        parse_address(args.connect)
    except ValueError as e:
        return str(e)
    if args.target or args.draft or getattr(args, "pair", None):
        return "with --connect the server's models are used: drop --target/--draft/--pair"
    try:
        token = connect_token(args)
    except UsageError as e:
        return str(e)
    if not token:
        return (
            "--connect needs the server's token: --token-file PATH (the file `specviz serve` "
            "named) or $SPECVIZ_TOKEN"
        )
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
    """cli/session/run.py's run, whose formats it is given, on the engine at args.connect (the one
    loop: cli.session.session_loop.drive)."""
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
        check=True,  # the server's rounds are held to what `inspect` checks
    )
