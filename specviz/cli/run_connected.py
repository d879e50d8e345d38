"""`specviz run --connect HOST:PORT --token T`: the same run, on a `specviz serve` engine.

It prints and writes what a local run does (the rounds, the summary, the trace written a
round at a time to NAME.partial.jsonl), from the records the server sends. If the
connection is lost, the rounds received are kept: summarised, written to the trace, and
said so; the exit code is then 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable

from specviz.cli.options import UsageError, fail, finish_trace
from specviz.cli.terminal import printable

EXIT_LOST = 1


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
    args: argparse.Namespace,
    settings,
    prompt: str,
    drafting: tuple,
    format_round: Callable[..., str],
    format_summary: Callable[[dict], str],
) -> int:
    """cli/run.py's run, whose formats it is given, on the engine at args.connect."""
    from specviz.core.metrics.running import summary
    from specviz.core.trace.live_file import LiveTrace
    from specviz.core.trace.session import Session
    from specviz.remote.protocol import RemoteError

    try:
        remote = _connect(args)
    except (UsageError, ValueError) as e:
        return fail(str(e))
    except RemoteError as e:
        return fail(f"cannot connect: {e}")
    lost, interrupted, live = None, False, None
    show = not args.quiet and not args.json
    colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    try:
        try:
            header = remote.start(
                prompt, settings, trace=bool(args.trace), chat=args.chat, drafting=drafting
            )
        except KeyboardInterrupt:
            return 130
        except RemoteError as e:
            return fail(f"the server could not start the session: {e}")
        session = Session(header)
        if args.trace:
            live = LiveTrace(args.trace, force=args.force)
            try:
                live.start(header)
            except OSError as e:
                return fail(f"could not write the trace: {e}")
        if show:
            print(printable(header.prompt), flush=True)
        try:
            try:
                for rnd in remote.run():
                    session.append(rnd)
                    if live is not None:
                        live.add(rnd)
                    if show:
                        print(format_round(rnd, colour), flush=True)
            except KeyboardInterrupt:
                interrupted = True
                for rnd in remote.pause():
                    if session.append(rnd) and live is not None:
                        live.add(rnd)
        except RemoteError as e:
            lost = e
        except OSError as e:
            live.close()
            return fail(f"could not write the trace: {e}; the rounds so far are in {live.partial}")
    finally:
        remote.close()
    result = summary(session)
    names = {"target": header.target.name, "draft": header.draft.name}
    if args.json:
        print(json.dumps({"pair": names, **result, "text": session.text}))
    else:
        if show:
            print(f"\n{printable(session.text)}\n")
        print(format_summary(result))
    if lost is not None:
        n = len(session.rounds)
        print(
            f"specviz: error: {lost}; the {n} round{'s' if n != 1 else ''} received are kept"
            + (" (in the trace)" if args.trace else ""),
            file=sys.stderr,
        )
    if live is not None and (status := finish_trace(live, session)) is not None:
        return status
    if lost is not None:
        return EXIT_LOST
    return 130 if interrupted else 0
