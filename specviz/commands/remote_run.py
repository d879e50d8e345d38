"""`specviz run --connect HOST:PORT --token T`: the same run, on a `specviz serve` engine.

It prints and writes what a local run does (the rounds, the summary, the trace), from the
records the server sends. If the connection is lost, the rounds received are kept: they are
summarised and written to the trace, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable

from .common import UsageError, fail

EXIT_LOST = 1


def add_connect_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("remote engine")
    group.add_argument(
        "--connect", metavar="HOST:PORT", help="run on a `specviz serve` engine (its models)"
    )
    group.add_argument(
        "--token", help="the token `specviz serve` printed (default: $SPECVIZ_TOKEN)"
    )
    group.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds to wait for any one answer of the server (default 600)",
    )


def run_connected(
    args: argparse.Namespace,
    settings,
    prompt: str,
    format_round: Callable[..., str],
    format_summary: Callable[[dict], str],
) -> int:
    """The run of commands/run.py, whose formats it is given, on the engine at args.connect."""
    from ..core.session import Session
    from ..core.stats import summary
    from ..core.tracefile import save
    from ..remote.client import RemoteEngine
    from ..remote.protocol import ConnectionLost, RemoteError

    token = args.token or os.environ.get("SPECVIZ_TOKEN")
    try:
        if args.target or args.draft or args.pair:
            raise UsageError(
                "with --connect the server's models are used: drop --target/--draft/--pair"
            )
        if not token:
            raise UsageError("--connect needs --token (the one `specviz serve` printed)")
        if not args.timeout > 0:
            raise UsageError(f"--timeout must be > 0, got {args.timeout}")
        remote = RemoteEngine(args.connect, token, reply_timeout=args.timeout)
    except (UsageError, ValueError) as e:
        return fail(str(e))
    except RemoteError as e:
        return fail(f"cannot connect: {e}")
    lost = interrupted = None
    session = None
    show = not args.quiet and not args.json
    colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    try:
        try:
            session = Session(remote.start(prompt, settings, trace=bool(args.trace)))
        except KeyboardInterrupt:
            return 130
        except ConnectionLost as e:
            return fail(f"the connection to the server was lost: {e}")
        except RemoteError as e:
            return fail(str(e))
        if show:
            print(prompt, flush=True)
        try:
            try:
                for rnd in remote.run():
                    session.append(rnd)
                    if show:
                        print(format_round(rnd, colour), flush=True)
            except KeyboardInterrupt:
                interrupted = True
                for rnd in remote.pause():
                    session.append(rnd)
        except RemoteError as e:
            lost = e
    finally:
        remote.close()
    target, draft = session.header.target.name, session.header.draft.name
    result = summary(session)
    if args.json:
        print(
            json.dumps({"pair": {"target": target, "draft": draft}, **result, "text": session.text})
        )
    else:
        if show:
            print(f"\n{session.text}\n")
        print(format_summary(result))
    if lost is not None:
        n = len(session.rounds)
        print(
            f"specviz: error: {lost}; the {n} round{'s' if n != 1 else ''} received are kept"
            + (" (in the trace)" if args.trace else ""),
            file=sys.stderr,
        )
    if args.trace:
        try:
            save(session, args.trace)
        except OSError as e:
            return fail(f"could not write the trace: {e}")
        print(f"trace written to {args.trace}", file=sys.stderr)
    if lost is not None:
        return EXIT_LOST
    return 130 if interrupted else 0
