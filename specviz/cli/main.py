"""`specviz` opens the window; `specviz run | models | inspect | lab | tune | serve | bench |
doctor | cache` work headless.

Every command reports bad input as one line on stderr and exit code 2, before any model
is loaded where it can.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import sys

from specviz import __version__

# name -> module under specviz.cli, each with add_parser(subparsers) and run(args).
MODULES = {
    "run": "session.run", "models": "models", "inspect": "inspect", "lab": "lab",
    "tune": "tune.tune", "serve": "session.serve", "bench": "bench.bench",
    "doctor": "bench.doctor", "check-head": "heads.check_head",
    "train-head": "heads.train_head", "cache": "cache",
}  # fmt: skip
COMMANDS = tuple(MODULES)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specviz",
        description="Explore speculative decoding. Without a command, opens the window.",
    )
    parser.add_argument("--version", action="version", version=f"specviz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"specviz.cli.{MODULES[name]}").add_parser(sub)
    gui = sub.add_parser("gui", help="open the window (the default)")
    from specviz.cli.options import add_model_args

    add_model_args(gui)
    from specviz.cli.drafting_options import add_drafter_options

    add_drafter_options(gui)
    gui.add_argument("trace", nargs="?", help="a trace file to open")
    _add_session_args(gui)
    _add_engine_args(gui)
    return parser


# The Settings fields the window's Setup panel has no control for: a command line cannot
# set them there (the typical rule's bounds; `specviz run` takes them).
NOT_IN_SETUP = ("typical_epsilon", "typical_delta")


def window_settings() -> dict[str, type]:
    """The window's Setup values a command line may set, each typed as its Settings default:
    every Settings field but NOT_IN_SETUP. What is not given keeps the window's own defaults
    (its first-launch seed among them)."""
    from specviz.core.trace.records import Settings

    d = Settings()
    names = [f.name for f in dataclasses.fields(Settings) if f.name not in NOT_IN_SETUP]
    return {name: type(getattr(d, name)) for name in names}


def _add_session_args(parser: argparse.ArgumentParser) -> None:
    from specviz.cli.options import add_tree_args, finite_float
    from specviz.core.trace import verifiers
    from specviz.core.trace.records import TREE_SETTINGS

    group = parser.add_argument_group("the first session (the Setup panel)")
    group.add_argument("--prompt", help="the text to continue")
    for name, kind in window_settings().items():
        flag = "--" + name.replace("_", "-")
        if name == "verifier":
            group.add_argument(flag, choices=verifiers.names(), default=None)
        elif kind is bool:  # a check box: given, it is ticked
            group.add_argument(flag, action="store_true", default=None)
        elif name not in TREE_SETTINGS:
            group.add_argument(flag, type=finite_float if kind is float else int, default=None)
    add_tree_args(group)  # as `specviz run` takes them, with its help
    parser.set_defaults(**dict.fromkeys(TREE_SETTINGS))  # not given: the window's own


def _window_settings(args: argparse.Namespace, drafter=None):
    """(the Setup's settings with what the command line gave, the prompt or None), or a
    UsageError naming the bad value (a tree for a `drafter` that drafts chains only)."""
    from specviz.cli.options import UsageError
    from specviz.core.resources import DEMO_SEED
    from specviz.core.trace.records import Settings

    names = window_settings()
    given = {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
    settings = Settings(**{"seed": DEMO_SEED, **given})
    try:
        settings.validate()
    except ValueError as e:
        raise UsageError(str(e)) from None
    if settings.tree and drafter is not None:
        from specviz.core.drafters.registry import check_tree_kind

        try:
            check_tree_kind(drafter.kind)
        except ValueError as e:
            raise UsageError(str(e)) from None
    if args.prompt is not None and not args.prompt.strip():
        raise UsageError("--prompt is empty: give some text for the models to continue")
    return (settings if given else None), args.prompt


def _names_a_file(arg: str) -> bool:
    """`specviz ARG`: ARG is a file to open, not a command (a path, or a name with a dot)."""
    return arg not in (*COMMANDS, "gui") and (
        "." in arg or "/" in arg or os.sep in arg or os.path.exists(arg)
    )


def trace_problem(path: str) -> str | None:
    """Why `path` cannot be opened as a trace, read from its first line; None if it may be."""
    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 20)
    except IsADirectoryError:
        return f"{path} is a folder, not a trace"
    except FileNotFoundError:
        return f"{path}: no such file"
    except OSError as e:
        return f"cannot read {path}: {e.strerror or e}"
    try:
        header = json.loads(first)
    except ValueError:
        header = None
    if not (
        isinstance(header, dict)
        and header.get("type") == "session"
        and str(header.get("schema", "")).startswith("specviz.trace/")
    ):
        return f"{path} is not a trace (its first line is not a specviz.trace session header)"
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    # `specviz`, `specviz --target ...` and `specviz trace.jsonl` all open the window.
    opens_window = (
        not argv
        or _names_a_file(argv[0])
        or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"))
    )
    if opens_window:
        argv = ["gui", *argv]
    args = parser.parse_args(argv)
    if args.command in (None, "gui"):
        from specviz.cli.options import fail

        problem = trace_problem(args.trace) if getattr(args, "trace", None) else None
        problem = problem or _engine_problem(args)
        if problem:
            return fail(problem)
        return _open_window(args)
    module = importlib.import_module(f"specviz.cli.{MODULES[args.command]}")
    try:
        result = module.run(args)
    except KeyboardInterrupt:  # Ctrl-C while models load: no traceback (run saves its rounds)
        print("specviz: interrupted", file=sys.stderr)
        return 130
    if not isinstance(result, int):  # `lab --gui`: the command prepared, a window opens
        from specviz.gui.app import open_lab

        return open_lab(result)
    return result


def _open_window(args: argparse.Namespace) -> int:
    """The main window: the pair from the arguments or the built-in default."""
    from specviz.cli.drafting_options import drafting_from, pair_specs
    from specviz.cli.options import UsageError, fail, load_options

    try:
        drafter, policy = drafting_from(args)
        target, draft = pair_specs(args, drafter)
        settings, prompt = _window_settings(args, drafter)
    except UsageError as e:
        return fail(str(e))
    from specviz.gui.app import main as gui_main

    specs = (target, draft or "")
    drafting, options = (drafter, policy), load_options(args)
    # A trace opened alone is replayed without models; naming models loads them too.
    named = args.target or args.draft or args.pair or args.connect
    return gui_main(
        specs, args.device, options.dtype, args.trace, drafting, options, **_engine_choice(args),
        threads=args.threads, load=not (args.trace and not named), settings=settings,
        prompt=prompt, chat=args.chat,
    )  # fmt: skip


def _add_engine_args(parser: argparse.ArgumentParser) -> None:
    from specviz.cli.session.run_connected import add_connect_args

    group = add_connect_args(parser, "where the engine runs", timeout=False)
    group.add_argument(
        "--engine",
        choices=("thread", "process"),
        default=None,
        help="process (default): the engine in a child process, so that the window's drawing "
        "does not slow the rounds it measures (its speedup then agrees with `specviz run`'s: "
        "0.99 of it, against 0.78 on a thread; benchmarks/window_speedup.py); thread: on a "
        "thread of the window's process",
    )


def _engine_choice(args: argparse.Namespace) -> dict:
    from specviz.cli.session.run_connected import connect_token

    engine = args.engine or ("thread" if args.connect else "process")  # --connect: the server's
    token = connect_token(args) if args.connect else None  # checked by _engine_problem
    return {"connect": args.connect, "token": token, "engine": engine}


def _engine_problem(args: argparse.Namespace) -> str | None:
    """Why --connect / --engine cannot be followed, or None."""
    if not args.connect:
        if args.token or args.token_file:
            return "--token-file is for --connect" if args.token_file else "--token is refused"
        return None
    if args.engine == "process":
        return "--connect uses the server's engine: drop --engine process"
    from specviz.cli.session.run_connected import connect_problem

    return connect_problem(args)
