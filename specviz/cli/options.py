"""Arguments and messages shared by the commands.

The model options (`add_model_args`, `load_options`) are the same for `run`, `lab`, `tune`,
`serve` and the window: a command adds them with one call and turns its namespace into a
core.models.load_options.LoadOptions with another. Values are checked as they are parsed, so
bad input is one line and exit code 2 before any model loads.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys

from specviz.core.models.vocab_bridge import BRIDGES
from specviz.core.trace import verifiers
from specviz.core.trace.records import TREE_DRAWS, TREE_SETTINGS, TREE_SHAPES, Settings

EXIT_BAD_INPUT = 2
SEED_MAX = 2**64 - 1  # torch.Generator.manual_seed takes 0 .. 2**64 - 1
DTYPE_CHOICES = ("auto", "config", "float32", "bfloat16", "float16")
# What --device accepts: one torch device. `auto` is kept for old command lines (it means
# "cuda if there is one, else cpu", not transformers' device_map="auto").
DEVICE_RE = re.compile(r"(cpu|mps|auto|(cuda|xpu)(:\d+)?)")
DEVICE_MAP_NAMES = ("auto", "balanced", "balanced_low_0", "sequential")


class UsageError(Exception):
    """Bad input: reported as one line and exit code 2."""


def fail(message: str) -> int:
    from specviz.cli.terminal import printable

    print(f"specviz: error: {printable(message)}", file=sys.stderr)
    return EXIT_BAD_INPUT


def finish_trace(live, session) -> int | None:
    """Move a run's partial trace (core.trace.live_file.LiveTrace) onto its name and say where;
    an exit status if that failed (the partial file stays), else None."""
    from specviz.cli.terminal import printable
    from specviz.core.metrics.running import summary

    try:
        written = live.finish(session, summary(session))
    except OSError as e:
        live.close()
        return fail(f"could not write the trace: {e}")
    print(f"trace written to {printable(str(written))}", file=sys.stderr)
    return None


# ---------------------------------------------------------------------------- value types


def device_arg(text: str) -> str:
    """A torch device name: cpu, cuda, cuda:N, mps, xpu[:N] (or the old `auto`)."""
    value = text.strip().lower()
    if not DEVICE_RE.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"unknown device {text!r}: use cpu, cuda, cuda:N (N a GPU number) or mps"
        )
    return value


def device_map_arg(text: str) -> str | dict:
    """`auto` (or balanced, balanced_low_0, sequential) or a JSON object of module -> device."""
    value = text.strip()
    if value in DEVICE_MAP_NAMES:
        return value
    try:
        mapping = json.loads(value)
    except ValueError:
        mapping = None
    if not isinstance(mapping, dict) or not all(isinstance(k, str) for k in mapping):
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither one of {', '.join(DEVICE_MAP_NAMES)} nor a JSON object "
            'of module name -> device (e.g. \'{"": "cuda:0"}\')'
        )
    for module, device in mapping.items():
        if isinstance(device, bool) or not (
            isinstance(device, int) and device >= 0
            or isinstance(device, str) and (DEVICE_RE.fullmatch(device) or device == "disk")
        ):  # fmt: skip
            raise argparse.ArgumentTypeError(
                f"device map entry {module!r}: {device!r} is not a device "
                "(a GPU number, cpu, cuda:N, mps or disk)"
            )
    return mapping


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def seed_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"{text} is out of range (0 to 2**64 - 1 = {SEED_MAX})")
    return value


class _Given(argparse.Action):
    """Stores a value and notes that the user gave it (args.given), so that a default that
    --use-generation-config replaces is told from a value typed on the command line."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        given = set(getattr(namespace, "given", None) or ())
        namespace.given = given | {self.dest}


# ------------------------------------------------------------------------------- models


def threads_arg(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= n <= 1024:
        raise argparse.ArgumentTypeError(f"must be between 1 and 1024, got {n}")
    return n


def dtype_list(text: str) -> tuple[str, ...]:
    """--dtype of `tune`: one dtype or a comma list of them, each swept."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    bad = [n for n in names if n not in DTYPE_CHOICES]
    if not names or bad:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected {', '.join(DTYPE_CHOICES)} or a comma list of them"
        )
    return names


def add_model_args(parser: argparse.ArgumentParser, dtype_lists: bool = False) -> None:
    group = parser.add_argument_group("models")
    group.add_argument(
        "--target",
        help="target model: builtin:NAME, a hub id or a folder "
        "(default: the built-in default pair)",
    )
    group.add_argument("--draft", help="draft model: builtin:NAME, a hub id or a folder")
    group.add_argument("--pair", help="a built-in pair by name (see `specviz models`)")
    group.add_argument(
        "--vocab-bridge",
        choices=BRIDGES,
        help="a --draft whose tokenizer differs from the target's: tli drafts only the tokens "
        "both vocabularies share, string re-tokenizes the draft's greedy text (both lossless "
        "at any temperature; the same as --drafter tli / string)",
    )
    group.add_argument(
        "--threads",
        type=threads_arg,
        help="torch's intra-op threads (default: one per core but one, so that other work on "
        "the machine does not stall every operation: see core.engine.threads)",
    )
    group.add_argument(
        "--device",
        type=device_arg,
        default="cpu",
        help="where both models run: cpu, cuda, cuda:N or mps (default cpu). `auto` (cuda if "
        "there is one) is deprecated: for transformers' device_map=auto use --device-map",
    )
    group.add_argument(
        "--device-map",
        type=device_map_arg,
        help="place the target with accelerate, as from_pretrained(device_map=...): auto "
        "(spread over every GPU, then CPU memory), balanced, sequential, or a JSON object "
        "of module -> device; replaces --device for the target",
    )
    group.add_argument(
        "--draft-device",
        type=device_arg,
        help="the draft's device (default: --device, or where --device-map puts the "
        "target's input embeddings)",
    )
    dtype = {"type": dtype_list} if dtype_lists else {"choices": DTYPE_CHOICES}
    group.add_argument(
        "--dtype",
        default=None,
        **dtype,
        help="weights' dtype: auto = float32 or bfloat16, whichever verifies K drafts faster "
        "on this machine (timed once, kept in the cache); config = as stored in each model's "
        "config; float32, bfloat16, float16 (default: auto for a built-in pair, else float32)"
        + ("; a list (float32,bfloat16) sweeps each" if dtype_lists else ""),
    )
    group.add_argument(
        "--attn-implementation",
        help="transformers' attn_implementation for both models (eager, sdpa, "
        "flash_attention_2, ...; default: transformers' choice)",
    )
    group.add_argument("--revision", help="branch, tag or commit of a hub target")
    group.add_argument("--draft-revision", help="branch, tag or commit of a hub draft")
    group.add_argument(
        "--chat",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the prompt as a user turn of the target's chat template (default: on for an "
        "instruct target, one whose tokenizer has a template and whose name or "
        "generation_config.json marks it instruct; --no-chat: the raw text)",
    )
    group.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow a model whose config maps to Python code in its repository (runs that "
        "code; off by default)",
    )


def load_options(args: argparse.Namespace):
    """The core.models.load_options.LoadOptions that the model arguments ask for."""
    from specviz.core.models.load_options import LoadOptions

    def get(name, default=None):
        return getattr(args, name, default)

    dtype = get("dtype") or default_dtype(args)
    k = get("k")
    return LoadOptions(
        device=get("device") or "cpu",
        dtype=dtype if isinstance(dtype, str) else dtype[0],
        dtype_k=k if isinstance(k, int) and 1 <= k <= 32 else 4,
        device_map=get("device_map"),
        draft_device=get("draft_device"),
        attn_implementation=get("attn_implementation"),
        revision=get("revision"),
        draft_revision=get("draft_revision"),
        trust_remote_code=bool(get("trust_remote_code")),
        tp_size=get("tp_size") or 1,
        vocab_bridge=get("vocab_bridge")
        or next((b for b in BRIDGES if b in str(get("drafter", "")).split(",")), None),
    )


def default_dtype(args: argparse.Namespace) -> str:
    """auto for a built-in pair (the default pair included), float32 for any other."""
    target = getattr(args, "target", None)
    return "float32" if target and not str(target).startswith("builtin:") else "auto"


def model_specs(args: argparse.Namespace) -> tuple[str, str]:
    """(target, draft) from --pair / --target / --draft, or the built-in default."""
    if args.pair and (args.target or args.draft):
        raise UsageError("give either --pair or --target/--draft, not both")
    if bool(args.target) != bool(args.draft):
        raise UsageError("give both --target and --draft (or neither, for the default pair)")
    if args.target:
        return args.target, args.draft
    from specviz.core.models.builtin import DEFAULT_PAIR

    name = args.pair or DEFAULT_PAIR
    if not name.startswith("builtin:"):
        name = f"builtin:{name}"
    return name, name


# ----------------------------------------------------------------------------- sampling


def add_sampling_args(parser: argparse.ArgumentParser) -> None:
    d = Settings()
    group = parser.add_argument_group("sampling")
    group.add_argument(
        "--k", type=int, default=d.k, help=f"drafted tokens per round (1-32, default {d.k})"
    )
    group.add_argument(
        "--temperature",
        type=finite_float,
        default=d.temperature,
        action=_Given,
        help="0 = greedy (default 1.0)",
    )
    group.add_argument(
        "--top-k", type=int, default=d.top_k, action=_Given, help="0 = off (default)"
    )
    group.add_argument(
        "--top-p", type=finite_float, default=d.top_p, action=_Given, help="1.0 = off (default)"
    )
    group.add_argument(
        "--seed", type=seed_arg, default=d.seed, help=f"0 to 2**64 - 1 (default {d.seed})"
    )
    group.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens, action=_Given)
    group.add_argument(
        "--top-n",
        type=int,
        default=d.top_n,
        help=f"tokens stored per position in the trace (default {d.top_n})",
    )
    group.add_argument(
        "--verifier",
        choices=verifiers.names(),
        default=d.verifier,
        help="how the drafts are judged (default token; a tree: tree): "
        + verifiers.help_text().replace("%", "%%"),
    )
    group.add_argument(
        "--typical-epsilon",
        type=finite_float,
        default=d.typical_epsilon,
        help="--verifier typical: keep x while p(x) > min(EPSILON, DELTA exp(-H(p))) "
        f"(default {d.typical_epsilon})",
    )
    group.add_argument(
        "--typical-delta",
        type=finite_float,
        default=d.typical_delta,
        help="--verifier typical: the entropy-scaled threshold's factor "
        f"(default {d.typical_delta})",
    )
    add_tree_args(group)
    group.add_argument(
        "--use-generation-config",
        action="store_true",
        help="take temperature, top-k, top-p and max new tokens from the target's "
        "generation_config.json where the command line does not give them",
    )


def add_tree_args(group) -> None:
    """--tree-width, --tree-budget, --tree-draw, --tree-shape: a token tree for a chain."""
    d = Settings()
    group.add_argument(
        "--tree-width", type=int, default=d.tree_width,
        help="children per drafted node: 1 = a chain (default), 2-8 = a token tree of depth "
        "K, verified in one target pass by the exact multi-draft rule (draft model only)",
    )  # fmt: skip
    group.add_argument(
        "--tree-budget", type=int, default=d.tree_budget,
        help=f"a tree's drafted nodes, at most (1-64, default {d.tree_budget})",
    )  # fmt: skip
    group.add_argument(
        "--tree-draw", choices=TREE_DRAWS, default=d.tree_draw,
        help="a node's children: sample = W draws from q (SpecInfer; default), topk = q's "
        "top W (EAGLE)",
    )  # fmt: skip
    group.add_argument(
        "--tree-shape", choices=TREE_SHAPES, default=d.tree_shape,
        help="full = every node gets children, breadth first, to the budget (default); "
        "dynamic = only the W likeliest nodes of a level (EAGLE-2)",
    )  # fmt: skip


def tree_settings(args: argparse.Namespace) -> dict:
    """The tree fields of Settings from the flags (the defaults where a command has none)."""
    d = Settings()
    return {name: getattr(args, name, getattr(d, name)) for name in TREE_SETTINGS}


def settings_from(args: argparse.Namespace) -> Settings:
    d = Settings()
    settings = Settings(
        k=args.k,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
        max_new_tokens=args.max_new_tokens,
        top_n=args.top_n,
        verifier=getattr(args, "verifier", "token"),
        typical_epsilon=getattr(args, "typical_epsilon", d.typical_epsilon),
        typical_delta=getattr(args, "typical_delta", d.typical_delta),
        **tree_settings(args),
    )
    try:
        settings.validate()
    except ValueError as e:
        raise UsageError(str(e)) from None
    return settings


def adopt_generation_config(
    settings: Settings, config: dict, args: argparse.Namespace
) -> tuple[Settings, dict]:
    """Settings with the sampling fields of a model's generation config (as
    core.models.generation.generation_defaults gives them) that the command line did not set; and
    the fields taken."""
    import dataclasses

    given = getattr(args, "given", None) or set()
    taken = {k: v for k, v in config.items() if k not in given and hasattr(settings, k)}
    adopted = dataclasses.replace(settings, **taken)
    try:
        adopted.validate()
    except ValueError as e:
        raise UsageError(f"the target's generation_config.json: {e}") from None
    return adopted, taken


def interruptible(work, progress, stopped):
    """work(cancel) with Ctrl-C made gentle: the first sets `cancel` (a threading.Event the
    work checks between rounds), a second stops at once and returns stopped(), the partial
    result. Off the main thread, no handler is installed (signals reach the main one only)."""
    import signal
    import threading

    cancel = threading.Event()

    def on_sigint(signum, frame):
        if cancel.is_set():
            raise KeyboardInterrupt
        progress("stopping after this round (Ctrl-C again to stop now)")
        cancel.set()

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_sigint) if main else None
    try:
        return work(cancel)
    except KeyboardInterrupt:
        return stopped()
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
