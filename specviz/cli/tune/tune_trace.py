"""`specviz tune --from-trace TRACE`: the cost model, the advisor and the what-if from a
trace, without the models."""

from __future__ import annotations

import argparse
import json

from specviz.cli import speedup_text
from specviz.cli.options import fail


def describe_trace(session) -> dict:
    from specviz.core.metrics.costmodel import figures, figures_json, round_k, whatif_acceptance
    from specviz.core.metrics.speed_tracker import WINDOW

    rounds = session.rounds
    # The window every other view of a trace uses (run, inspect, the summary, the window,
    # the CSV): one trace, one figure.
    probed = any(r.probes for r in rounds)
    calibration = None if probed else session.header.baseline_ms_per_token
    fig = figures(rounds, WINDOW, calibration_ms=calibration)
    k = max((round_k(r) for r in rounds), default=0)
    return {
        **figures_json(fig),
        # An estimate: the first K' judged positions of each stored round.
        "whatif": [whatif_acceptance(rounds, kk) for kk in range(1, k)],
    }


def format_trace(path: str, d: dict) -> str:
    def f(value, fmt="{:.2f}"):
        return "n/a" if value is None else fmt.format(value)

    lines = [
        f"{json.dumps(path)[1:-1]}: {d['rounds']} rounds at K={d['k']}, "
        f"alpha {f(d['alpha'], '{:.3f}')}, {f(d['tokens_per_pass'])} tokens per target pass, "
        f"{d['probes']} probes",
    ]
    if d["probes"]:
        lines += [
            f"T_t(1) {f(d['baseline_ms_per_token'])} ms ({d['baseline_steps']} steps), "
            f"T_d(1) {f(d['t_draft_ms'])} ms",
            f"speedup {speedup_text.measured(d)}   refined "
            f"{f(d['speedup_refined'], '{:.2f}x')}   Leviathan "
            f"{f(d['speedup_leviathan'], '{:.2f}x')}",
            "advisor (refined prediction, K:speedup): "
            + "  ".join(f"{k}:{v:.2f}" for k, v in d["advisor"]["curve"]),
            f"advisor's best K: {f(d['advisor']['best_k'], '{}')}",
        ]
    else:
        lines.append("no cost-model probes in this trace (written before schema 1.1): no speedup")
    for w in d["whatif"]:
        lines.append(
            f"what-if K'={w['k']} (estimate from the first {w['k']} judged positions): "
            f"acceptance {f(w['acceptance'], '{:.3f}')}, "
            f"{f(w['tokens_per_round'])} tokens per target pass"
        )
    return "\n".join(lines)


def run_from_trace(args: argparse.Namespace) -> int:
    from specviz.core.trace.files import load
    from specviz.core.trace.records import TraceError

    path = args.from_trace
    try:
        session = load(path)
    except TraceError as e:
        return fail(f"{path} is not a valid trace: {e}")
    except OSError as e:
        return fail(f"cannot read {path}: {e.strerror or e}")
    d = describe_trace(session)
    print(json.dumps({"file": path, **d}) if args.json else format_trace(path, d))
    return 0
