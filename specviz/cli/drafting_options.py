"""The drafter and policy options every command that runs the engine shares."""

from __future__ import annotations

import argparse

from specviz.cli.options import UsageError, model_specs
from specviz.core.decoding.k_policy import POLICIES, PolicyConfig
from specviz.core.drafters.registry import SPECS, DrafterConfig, all_params, spec
from specviz.core.trace import verifiers

_DEFAULT_DRAFTER, _DEFAULT_POLICY = DrafterConfig(), PolicyConfig()


def add_drafter_options(parser: argparse.ArgumentParser, lists: bool = False) -> None:
    """--drafter and each drafter's parameters (from core.drafters.registry), --policy,
    --threshold. lists: --drafter and --policy take comma-separated lists (`tune` sweeps
    them; see drafting_lists)."""
    choice = {"type": str, "metavar": "NAME[,NAME...]"} if lists else {}
    listed = " (a comma-separated list: each one is swept)" if lists else ""
    group = parser.add_argument_group(
        "drafter and policy",
        "Every drafter and policy keeps the output exactly the target's: a deterministic "
        "drafter (lookup) has a one-hot q, so a copied token x is kept with probability p(x).",
    )
    group.add_argument(
        "--drafter",
        **(choice or {"choices": tuple(SPECS)}),
        default=_DEFAULT_DRAFTER.kind,
        help="who proposes the K tokens: "
        + "; ".join(spec.help for spec in SPECS.values())
        + listed,
    )
    add_drafter_params(group)
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


def add_drafter_params(group) -> None:
    """A flag per drafter parameter of the registry (--ngram-max, --exit-layer, ...)."""
    for param in all_params():
        default = "" if param.default is None else f", default {param.default}"
        group.add_argument(
            param.flag,
            dest=param.name,
            type=str if param.text else float if param.decimals else int,
            default=None,
            metavar=param.metavar,
            help=f"{param.help}{default}",
        )


def drafter_params(args: argparse.Namespace) -> dict:
    """Every drafter parameter's value on the command line (None: not given)."""
    return {p.name: getattr(args, p.name, None) for p in all_params()}


def _drafter(args: argparse.Namespace, kind: str) -> DrafterConfig:
    """The drafter of this kind with the parameters given for it on the command line."""
    return DrafterConfig(kind, **{p.name: getattr(args, p.name) for p in spec(kind).params})


def drafting_from(args: argparse.Namespace) -> tuple[DrafterConfig, PolicyConfig]:
    """The drafter and policy the options ask for, or UsageError."""
    bridge = getattr(args, "vocab_bridge", None)
    drafter = _drafter(
        args, bridge if bridge and args.drafter == _DEFAULT_DRAFTER.kind else args.drafter
    )
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


def verifier_list(text: str) -> tuple[str, ...]:
    """Comma-separated --verifier of `tune`: lossless rules only (a lossy one changes the
    output, so its speed is no speedup of the target), or UsageError."""
    names = tuple(_names("--verifier", text, verifiers.names(trees=False)))
    lossy = [n for n in names if not verifiers.spec(n).lossless]
    if lossy:
        raise UsageError(
            f"--verifier {lossy[0]}: tune compares rules that keep the target's output; "
            f"{lossy[0]} is lossy (try it with `specviz run` or the lab)"
        )
    return names


def drafting_lists(
    args: argparse.Namespace,
) -> tuple[tuple[DrafterConfig, ...], tuple[PolicyConfig, ...]]:
    """The drafters and policies of comma-separated --drafter / --policy, or UsageError."""
    drafters = tuple(_drafter(args, n) for n in _names("--drafter", args.drafter, tuple(SPECS)))
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
    if drafter.needs_draft_model:
        return model_specs(args)
    if args.draft:
        needing = ", ".join(k for k, s in SPECS.items() if s.needs_draft_model)
        raise UsageError(f"--draft is used only by --drafter {needing} (not {drafter.kind})")
    if args.target:
        if args.pair:
            raise UsageError("give either --pair or --target, not both")
        return args.target, None
    return model_specs(args)[0], None


def pair_spec(args: argparse.Namespace, drafter: DrafterConfig):
    """What the options ask to load (core.models.spec.PairSpec), or UsageError."""
    from specviz.cli.options import load_options
    from specviz.core.models.spec import PairSpec

    target, draft = pair_specs(args, drafter)
    return PairSpec(target, draft, load_options(args))


def add_tree_sweep_args(group) -> None:
    """`tune`'s tree shapes: lists of widths and budgets, each pair swept beside the chain."""
    from specviz.core.trace.records import TREE_DRAWS, TREE_SHAPES

    group.add_argument(
        "--tree-width", default="1", metavar="W[,W...]",
        help="children per node, a list: 1 = the chain (default), 2-8 = a token tree of "
        "depth K; every width x budget is swept like a verifier (e.g. 1,2,4)",
    )  # fmt: skip
    group.add_argument("--tree-budget", default="16", metavar="N[,N...]",
                       help="a tree's nodes, at most, a list (1-64, default 16)")  # fmt: skip
    group.add_argument(
        "--tree-draw",
        choices=TREE_DRAWS,
        default="sample",
        help="children drawn from q (sample, default) or q's top W (topk)",
    )
    group.add_argument(
        "--tree-shape",
        choices=TREE_SHAPES,
        default="full",
        help="full (default) or dynamic (the likeliest nodes only, EAGLE-2)",
    )


def rule_list(args: argparse.Namespace) -> tuple[str, ...]:
    """`tune`'s rules: each --verifier's chain, and with --tree-width above 1 each tree
    (core.tune.sweep.tree_label, judged by the multi-draft rule), or UsageError."""
    from specviz.core.trace.records import Settings
    from specviz.core.tune.sweep import tree_label

    chains = verifier_list(args.verifier)
    widths = _numbers("--tree-width", args.tree_width)
    budgets = _numbers("--tree-budget", args.tree_budget)
    rules = [v for v in chains if 1 in widths or v != "token"]
    for w in (w for w in widths if w > 1):
        for b in budgets:
            try:
                Settings(tree_width=w, tree_budget=b).validate()
            except ValueError as e:
                raise UsageError(str(e)) from None
            rules.append(tree_label(w, b))
    if not rules:
        raise UsageError("--tree-width without 1 sweeps trees, which are judged token-wise: "
                         "add --verifier token")  # fmt: skip
    return tuple(rules)


def _numbers(option: str, text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise UsageError(f"{option}: expected integers like 1,2,4, got {text!r}") from None
    if len(set(values)) != len(values):
        raise UsageError(f"{option}: {text!r} names one twice")
    return values
