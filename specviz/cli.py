"""`specviz` opens the window; `specviz run | models | inspect | lab` work headless.

Every command reports bad input as one line on stderr and exit code 2, before any model
is loaded where it can.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__

# name -> module under specviz.commands, each with add_parser(subparsers) and run(args).
COMMANDS = ("run", "models", "inspect", "lab")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specviz",
        description="Explore speculative decoding. Without a command, opens the window.",
    )
    parser.add_argument("--version", action="version", version=f"specviz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"specviz.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"specviz.commands.{name}":
                raise
            continue  # a command not built yet
        module.add_parser(sub)
    gui = sub.add_parser("gui", help="open the window (the default)")
    from .commands.common import add_model_args

    add_model_args(gui)
    gui.add_argument("trace", nargs="?", help="a trace file to open")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    # `specviz`, `specviz --target ...` and `specviz trace.jsonl` all open the window.
    opens_window = (
        not argv
        or argv[0].endswith(".jsonl")
        or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"))
    )
    if opens_window:
        argv = ["gui", *argv]
    args = parser.parse_args(argv)
    if args.command in (None, "gui"):
        from .gui.app import main as gui_main

        return gui_main(args)
    module = importlib.import_module(f"specviz.commands.{args.command}")
    return module.run(args)
