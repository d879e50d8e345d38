"""`specviz serve`: the engine next to the models, for a window or `specviz run --connect`
elsewhere (docs/protocol.md). It binds 127.0.0.1 unless told otherwise; every request must
carry the token it prints. From another machine, tunnel the port over SSH."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from specviz.cli.drafting_options import add_drafter_options, drafting_from, pair_spec
from specviz.cli.options import UsageError, add_model_args, fail
from specviz.cli.terminal import printable
from specviz.core.engine.threads import set_threads
from specviz.core.models.tensor_parallel import TensorParallelError, tp_context
from specviz.remote.token_file import ARGV_REFUSED, TokenError, read_token, write_new_token

DEFAULT_PORT = 5555


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "serve", help="serve the engine to a window or `run --connect`", description=__doc__
    )
    add_model_args(parser)
    add_drafter_options(parser)  # a session's default; a client may choose its own
    net = parser.add_argument_group("network")
    net.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; use an SSH tunnel)",
    )
    net.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0 = any free port"
    )
    net.add_argument(
        "--token-file",
        metavar="PATH",
        help="the token clients must send: read from PATH if it exists (mode 0600), else a "
        "new random one written there; default $SPECVIZ_TOKEN, else a new one in the cache "
        "(serve-PORT.token). The token is never printed, only where it is",
    )
    net.add_argument("--token", help=argparse.SUPPRESS)  # refused: a command line is public
    parser.add_argument(
        "--tp-size",
        type=int,
        default=1,
        help="split the target over N processes (tensor parallelism, under `torchrun "
        "--nproc-per-node N`); rank 0 serves, the others follow each request",
    )
    net.add_argument(
        "--stop-with-stdin",
        action="store_true",
        help="stop when standard input closes (for a parent process that starts the engine)",
    )


def _say(message: str) -> None:
    print(f"[specviz serve] {printable(message)}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from specviz.core.models.pair import ModelLoadError
    from specviz.remote.protocol import endpoint_host, new_token
    from specviz.remote.server import ServeError, Server

    try:
        drafting = drafting_from(args)
        spec = pair_spec(args, drafting[0])
        if not 0 <= args.port < 65536:
            raise UsageError(f"--port must be in 0..65535, got {args.port}")
        if args.token:
            raise UsageError(ARGV_REFUSED)
        token, where = _token(args)
        tp = tp_context(args.tp_size, args.device or "cpu")
        if tp is not None and (args.device or "cpu").startswith("cuda"):
            args.device = f"cuda:{tp.local_rank}"
            spec = pair_spec(args, drafting[0])
    except (UsageError, TokenError, TensorParallelError) as e:
        return fail(str(e))
    if tp is not None and not tp.leader:
        return _follow(spec, drafting)
    try:  # listen first: a port in use is reported before minutes of loading
        server = Server(
            None,
            token or new_token(),  # replaced below by the one written to a file
            host=args.host,
            port=args.port,
            specs=(spec.target, spec.draft),
            log=_say,
            stop_fd=sys.stdin.fileno() if args.stop_with_stdin else None,
            drafting=drafting,
        )
        server.host.chat = args.chat  # a start that does not say (None: instruct chats)
    except ServeError as e:
        return fail(str(e))
    set_threads(args.threads)
    try:
        server.pair = spec.load(_say)
    except KeyboardInterrupt:
        server.close()
        return 130
    except ModelLoadError as e:
        server.close()
        return fail(str(e))
    address = f"{endpoint_host(args.host)}:{server.port}"
    if token is None:  # a new one, in a file only this user can read
        try:
            server.token, path = write_new_token(args.token_file, server.port)
        except OSError as e:
            server.close()
            return fail(f"cannot write the token file: {e.strerror or e}")
        where = f"in {path} (mode 0600)"
        connect = f"--token-file {path}"
    else:
        connect = "--token-file PATH" if args.token_file else "(with $SPECVIZ_TOKEN set)"
    print(f"specviz serve: listening on {address}", flush=True)
    print(f"  token: {printable(where)}", flush=True)
    print(f"  connect: specviz run --connect {address} {printable(connect)}", flush=True)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        _say(
            f"listening on {args.host}, not only this machine: anyone who can reach the port "
            "and has the token can drive the engine (an SSH tunnel to 127.0.0.1 is safer)"
        )
    if tp is not None:
        from specviz.remote.tp_follower import broadcast

        server.mirror = broadcast  # every rank carries out each request, in order
    previous = {s: signal.signal(s, lambda *_: server.stop()) for s in _signals()}
    try:
        server.serve_forever()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        server.close()
    _say("stopped")
    return 0


def _follow(spec, drafting) -> int:
    """A rank other than 0 of a split target: load it, then do what rank 0 broadcasts."""
    from specviz.core.models.pair import ModelLoadError
    from specviz.remote.tp_follower import Follower

    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - rank 0 alone speaks
    try:
        pair = spec.load(lambda message: None)
    except (ModelLoadError, TensorParallelError) as e:
        return fail(str(e))
    Follower(pair, (spec.target, spec.draft), drafting).follow()
    return 0


def _token(args) -> tuple[str | None, str]:
    """(the token, where it comes from), or (None, "") for a new one to write to a file once
    the port is known."""
    if args.token_file and Path(args.token_file).expanduser().exists():
        return read_token(args.token_file), f"read from {args.token_file}"
    if not args.token_file and os.environ.get("SPECVIZ_TOKEN"):
        return os.environ["SPECVIZ_TOKEN"], "from $SPECVIZ_TOKEN"
    return None, ""


def _signals() -> tuple:
    return tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM") if hasattr(signal, name))
