"""`specviz models`: the built-in pairs, where they come from, and their measured figures."""

from __future__ import annotations

import argparse
import json


def add_parser(sub) -> None:
    parser = sub.add_parser("models", help="list the built-in model pairs", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _fmt(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def describe(info: dict, default: bool) -> str:
    measured = info["measured"].get("measured", {})
    training = info["measured"].get("training", {})
    params = info["params"]
    lines = [
        f"{info['name']}{'  (default)' if default else ''}"
        f"{'' if info['present'] else '  [files missing]'}",
        f"  {info['summary']}",
        f"  source:  {info['source']}",
        f"  licence: {info['licence']}",
        f"  size:    {info['size_bytes'] / 1e6:.1f} MB in {info['path']}"
        + (f"; {params['target']:,} + {params['draft']:,} params" if len(params) == 2 else ""),
    ]
    if measured:
        lines.append(
            f"  measured with specviz run (K={measured.get('k')}, temperature "
            f"{measured.get('temperature')}, {measured.get('machine', 'this machine')}): "
            f"alpha {_fmt(measured.get('alpha'), '.3f')}, acceptance "
            f"{_fmt(measured.get('acceptance_rate'), '.3f')}, c {_fmt(measured.get('c'), '.3f')}, "
            f"speedup {_fmt(measured.get('speedup_measured'), '.2f')}x measured / "
            f"{_fmt(measured.get('speedup_predicted'), '.2f')}x predicted"
        )
    elif training.get("alpha") is not None:
        lines.append(f"  alpha {training['alpha']:.3f} on held-out text (training.json)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from specviz.core.models.builtin import BUILTIN_PAIRS, DEFAULT_PAIR

    infos = {name: pair.info() for name, pair in BUILTIN_PAIRS.items()}
    if args.json:
        print(json.dumps({"default": f"builtin:{DEFAULT_PAIR}", "pairs": list(infos.values())}))
        return 0
    print("\n\n".join(describe(info, name == DEFAULT_PAIR) for name, info in infos.items()))
    return 0
