"""The drafter and policy options every command that runs the engine shares."""

from __future__ import annotations

import argparse

from specviz.cli.options import UsageError, model_specs
from specviz.core.decoding.k_policy import POLICIES, PolicyConfig
from specviz.core.drafters.base import DRAFTERS, DrafterConfig

_DEFAULT_DRAFTER, _DEFAULT_POLICY = DrafterConfig(), PolicyConfig()


def add_drafter_options(parser: argparse.ArgumentParser, lists: bool = False) -> None:
    """--drafter, --ngram-max, --exit-layer, --policy, --threshold. lists: --drafter and
    --policy take comma-separated lists (`tune` sweeps them; see drafting_lists)."""
    choice = {"type": str, "metavar": "NAME[,NAME...]"} if lists else {}
    listed = " (a comma-separated list: each one is swept)" if lists else ""
    group = parser.add_argument_group(
        "drafter and policy",
        "Every drafter and policy keeps the output exactly the target's: a deterministic "
        "drafter (lookup) has a one-hot q, so a copied token x is kept with probability p(x).",
    )
    group.add_argument(
        "--drafter",
        **(choice or {"choices": DRAFTERS}),
        default=_DEFAULT_DRAFTER.kind,
        help="who proposes the K tokens: the draft model (default); 'lookup': n-grams copied "
        "from the prompt and text so far, no draft model (transformers' "
        "prompt_lookup_num_tokens); 'early-exit': the target's own first layers "
        "(transformers' assistant_early_exit)" + listed,
    )
    group.add_argument(
        "--ngram-max",
        type=int,
        default=_DEFAULT_DRAFTER.ngram_max,
        metavar="N",
        help="lookup: longest n-gram matched (transformers' max_matching_ngram_size, "
        f"default {_DEFAULT_DRAFTER.ngram_max})",
    )
    group.add_argument(
        "--exit-layer",
        type=int,
        metavar="L",
        help="early-exit: how many target layers draft (assistant_early_exit; default half)",
    )
    group.add_argument(
        "--policy",
        **(choice or {"choices": POLICIES}),
        default=_DEFAULT_POLICY.kind,
        help="how K is chosen each round: --k every round (default); 'heuristic': +2 after a "
        "fully accepted round, -1 otherwise (num_assistant_tokens_schedule='heuristic'); "
        "'threshold': up to --k, stopping after a draft the draft model gives less than "
        "--threshold (assistant_confidence_threshold)" + listed,
    )
    group.add_argument(
        "--threshold",
        type=float,
        default=_DEFAULT_POLICY.threshold,
        metavar="X",
        help=f"threshold policy: the confidence cut (default {_DEFAULT_POLICY.threshold})",
    )


def drafting_from(args: argparse.Namespace) -> tuple[DrafterConfig, PolicyConfig]:
    """The drafter and policy the options ask for, or UsageError."""
    drafter = DrafterConfig(args.drafter, ngram_max=args.ngram_max, exit_layer=args.exit_layer)
    policy = PolicyConfig(args.policy, threshold=args.threshold)
    try:
        drafter.validate()
        policy.validate()
    except ValueError as e:
        raise UsageError(str(e)) from None
    return drafter, policy


def _names(option: str, text: str, known: tuple[str, ...]) -> list[str]:
    names = [n.strip() for n in text.split(",")]
    for name in names:
        if name not in known:
            raise UsageError(f"{option}: unknown name {name!r} (one of {', '.join(known)})")
    if len(set(names)) != len(names):
        raise UsageError(f"{option}: {text!r} names one twice")
    return names


def drafting_lists(
    args: argparse.Namespace,
) -> tuple[tuple[DrafterConfig, ...], tuple[PolicyConfig, ...]]:
    """The drafters and policies of comma-separated --drafter / --policy, or UsageError."""
    drafters = tuple(
        DrafterConfig(n, ngram_max=args.ngram_max, exit_layer=args.exit_layer)
        for n in _names("--drafter", args.drafter, DRAFTERS)
    )
    policies = tuple(
        PolicyConfig(n, threshold=args.threshold) for n in _names("--policy", args.policy, POLICIES)
    )
    try:
        for config in (*drafters, *policies):
            config.validate()
    except ValueError as e:
        raise UsageError(str(e)) from None
    return drafters, policies


def pair_specs(args: argparse.Namespace, drafter: DrafterConfig) -> tuple[str, str | None]:
    """(target, draft) to load: no draft model for a drafter that needs none."""
    if drafter.kind == "model":
        return model_specs(args)
    if args.draft:
        raise UsageError(f"--draft is used only by --drafter model (not {drafter.kind})")
    if args.target:
        if args.pair:
            raise UsageError("give either --pair or --target, not both")
        return args.target, None
    return model_specs(args)[0], None
