"""Arguments and messages shared by the commands."""

from __future__ import annotations

import argparse
import sys

from ..core.trace import Settings

EXIT_BAD_INPUT = 2


class UsageError(Exception):
    """Bad input: reported as one line and exit code 2."""


def fail(message: str) -> int:
    print(f"specviz: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def add_model_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("models")
    group.add_argument(
        "--target",
        help="target model: builtin:NAME, a hub id or a folder "
        "(default: the built-in default pair)",
    )
    group.add_argument("--draft", help="draft model: builtin:NAME, a hub id or a folder")
    group.add_argument("--pair", help="a built-in pair by name (see `specviz models`)")
    group.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (default cpu)")
    group.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))


def add_sampling_args(parser: argparse.ArgumentParser) -> None:
    d = Settings()
    group = parser.add_argument_group("sampling")
    group.add_argument(
        "--k", type=int, default=d.k, help=f"drafted tokens per round (1-32, default {d.k})"
    )
    group.add_argument(
        "--temperature", type=float, default=d.temperature, help="0 = greedy (default 1.0)"
    )
    group.add_argument("--top-k", type=int, default=d.top_k, help="0 = off (default)")
    group.add_argument("--top-p", type=float, default=d.top_p, help="1.0 = off (default)")
    group.add_argument("--seed", type=int, default=d.seed)
    group.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens)
    group.add_argument(
        "--top-n",
        type=int,
        default=d.top_n,
        help=f"tokens stored per position in the trace (default {d.top_n})",
    )


def settings_from(args: argparse.Namespace) -> Settings:
    settings = Settings(
        k=args.k,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
        max_new_tokens=args.max_new_tokens,
        top_n=args.top_n,
    )
    try:
        settings.validate()
    except ValueError as e:
        raise UsageError(str(e)) from None
    return settings


def model_specs(args: argparse.Namespace) -> tuple[str, str]:
    """(target, draft) from --pair / --target / --draft, or the built-in default."""
    if args.pair and (args.target or args.draft):
        raise UsageError("give either --pair or --target/--draft, not both")
    if bool(args.target) != bool(args.draft):
        raise UsageError("give both --target and --draft (or neither, for the default pair)")
    if args.target:
        return args.target, args.draft
    from ..core.builtin import DEFAULT_PAIR

    name = args.pair or DEFAULT_PAIR
    if not name.startswith("builtin:"):
        name = f"builtin:{name}"
    return name, name
