"""`specviz inspect TRACE`: check a trace and say what is in it, without any model.

Exit status 0 for a valid trace; 2 for one that cannot be read or whose numbers contradict
each other, with a message naming the line and the field.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specviz.cli import speedup_text
from specviz.cli.options import fail
from specviz.core.trace import verifiers
from specviz.core.trace.verifiers import LOSSY_WARNING

MAX_PROBLEMS = 200  # enough to see a pattern; a broken 100k-round trace could list millions
SHOWN_PROBLEMS = 20
WHATIF_KS = 8  # the smaller K' the what-if estimate is shown for


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "inspect", help="validate a trace and summarise it (no models needed)", description=__doc__
    )
    parser.add_argument("trace", help="a trace file written by specviz (JSON Lines)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def describe(session, problems: list, reading: _Reading | None = None) -> dict[str, Any]:
    """Everything `inspect` reports, as plain JSON values. The figures (acceptance, speedups,
    ...) only for a valid trace: an invalid one's numbers mean nothing, and may be anything.
    reading: what a streamed read kept of the rounds (else the session's rounds are read)."""
    if reading is None:
        reading = _Reading(session.header)
        for rnd in session.rounds:
            reading.add(rnd)
    header = session.header
    report = {
        "valid": not problems,
        "problems": [dataclasses.asdict(p) for p in problems],
        "problems_truncated": len(problems) >= MAX_PROBLEMS,
        "warnings": list(session.warnings),
        "specviz": header.specviz,
        "created": header.created,
        "session_id": header.session_id,
        "prompt": header.prompt,
        "prompt_tokens": len(header.prompt_ids),
        "target": dataclasses.asdict(header.target),
        "draft": dataclasses.asdict(header.draft),
        "settings": dataclasses.asdict(header.settings),
        "lossy": header.settings.lossy,
        "rounds": reading.rounds,
        "chat": header.chat,
        "dtype_choice": header.dtype_choice,
    }
    if problems:
        return report
    stats = reading.fold.stats
    return {
        **report,
        "settings_changes": reading.changes,
        "finish_reason": reading.finish,
        "greedy_diff": reading.greedy_diff,
        **reading.fold.summary(),
        "accepted_lengths": stats.accepted_lengths,
        "undrafted": stats.undrafted,
        "metrics": stats.metrics.values(),  # core.metrics.registry.SPECS, by name
        # a smaller K's estimate reads a chain's judged positions; a tree has none
        "whatif": [] if header.settings.tree else whatif(reading.fates, reading.k),
    }


def strict_json(value: Any) -> Any:
    """value with every NaN and infinity (a header may hold them: json reads NaN, a 400-digit
    number reads as infinity) as None, so that --json prints strict JSON (null)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    return value


def _f(value: float | None, fmt: str = "{:.3f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def _count(n: int) -> str:
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _model(m: dict[str, Any]) -> str:
    where = "" if m["path"] == m["name"] else f"  from {m['path']}"
    return (
        f"{m['name']}  ({_count(m['params'])} params, vocab {m['vocab_size']}, "
        f"{m['dtype']}, {m['device']}){where}"
    )


def _settings(s: dict[str, Any]) -> str:
    greedy = " (greedy)" if s["temperature"] == 0 else ""
    return (
        f"K {s['k']}  temperature {s['temperature']:g}{greedy}"
        f"  top-k {s['top_k'] or 'off'}  top-p {s['top_p'] if s['top_p'] < 1 else 'off'}"
        f"  seed {s['seed']}  max new tokens {s['max_new_tokens']}  top-N {s['top_n']}"
        f"  verifier {s['verifier']}{_options(s)}{_tree(s)}"
    )


def _tree(s: dict[str, Any]) -> str:
    if s.get("tree_width", 1) < 2:
        return ""
    return (
        f"  tree: width {s['tree_width']}, budget {s['tree_budget']}, draw {s['tree_draw']}, "
        f"shape {s['tree_shape']} (K = its depth)"
    )


def _options(s: dict[str, Any]) -> str:
    """The verifier's options: " (epsilon 0.3, delta 0.09)" for typical."""
    rule = verifiers.SPECS.get(s["verifier"])
    if rule is None or not rule.options:
        return ""
    named = (f"{o.removeprefix(rule.name + '_')} {s[o]:g}" for o in rule.options)
    return f" ({', '.join(named)})"


def _figures(d: dict[str, Any]) -> list[str]:
    """The report's lines about what the rounds add up to (a valid trace's)."""
    lines = []
    for change in d["settings_changes"]:
        lines.append(f"  from round {change['round']}: {_settings(change['settings'])}")
    finish = d["finish_reason"]
    by_position = enumerate(d["acceptance_by_position"], start=1)
    tree = d["settings"].get("tree_width", 1) > 1
    lengths = enumerate(d["accepted_lengths"])
    lines += [
        f"rounds      {d['rounds']}  ({'finished: ' + finish if finish else 'not finished'})",
        f"tokens      {d['tokens']} emitted, {d['drafted']} drafted, {d['judged']} judged, "
        f"{d['accepted']} accepted",
        f"acceptance  {_f(d['acceptance_rate'])} (accepted/judged drafts)   alpha "
        f"{_f(d['alpha'])} (sum min(p, q), mean over judged positions)",
        f"efficiency  {_f(d['draft_efficiency'])} (accepted/all drafts, discarded included)",
        f"per round   {_f(d['mean_accepted'], '{:.2f}')} accepted, "
        f"{_f(d['tokens_per_forward'], '{:.2f}')} tokens per target pass, "
        f"{_f(d['ms_per_token'], '{:.2f}')} ms per token",
        f"speedup     {speedup_text.measured(d)}",
        f"            {speedup_text.predicted(d)}",
        f"            {speedup_text.basis(d)}",
        "acceptance by depth (accepted/tried tree nodes at depth 1..K):"
        if tree
        else "acceptance by position (accepted/judged at draft position 1..K):",
        "            " + ("  ".join(f"{i}: {_f(a)}" for i, a in by_position) or "n/a"),
        "accepted per round (how many rounds that drafted kept 0, 1, ... drafts):",
        "            "
        + ("  ".join(f"{i}: {n}" for i, n in lengths) or "n/a")
        + (f"  (and {d['undrafted']} rounds drafted nothing)" if d["undrafted"] else ""),
    ]
    lines += _metric_lines(d["metrics"])
    if d["whatif"]:
        lines.append(
            "what-if     ESTIMATE for a smaller K' (from the first K' judged positions of each "
            "round): acceptance, tokens per round"
        )
        lines.append(
            "            "
            + "  ".join(
                f"K'={w['k']}: {_f(w['acceptance'])}, {_f(w['tokens_per_round'], '{:.2f}')}"
                for w in d["whatif"]
            )
        )
    return lines


def _metric_lines(metrics: dict[str, Any]) -> list[str]:
    """A line per metric of core.metrics.registry.SPECS in the report: "label: value"."""
    from specviz.core.metrics.registry import SPECS, value_text

    shown = [spec for name, spec in SPECS.items() if name in metrics]
    return [f"{'metrics' if i == 0 else '':<12}{spec.label}: {value_text(metrics[spec.name])}"
            for i, spec in enumerate(shown)]  # fmt: skip


def whatif(fates: list, k: int) -> list[dict[str, Any]]:
    """costmodel.whatif_fates for K' = 1 .. K - 1 (at most WHATIF_KS of them, spread over
    that range), from each round's judged fates; K the largest the rounds asked for. Each is
    labelled an estimate."""
    from specviz.core.metrics.whatif import whatif_fates

    if k < 2:
        return []
    ks = sorted({round(1 + i * (k - 2) / max(WHATIF_KS - 1, 1)) for i in range(WHATIF_KS)})
    return [whatif_fates(fates, kk) for kk in ks if kk < k]


def format_report(path: str, d: dict[str, Any]) -> str:
    prompt = d["prompt"] if len(d["prompt"]) <= 70 else d["prompt"][:67] + "..."
    lines = [
        f"trace       {path}",
        f"written by  specviz {d['specviz'] or '?'}  {d['created']}  session {d['session_id']}",
        f"prompt      {json.dumps(prompt, ensure_ascii=False)}  ({d['prompt_tokens']} tokens)",
        f"target      {_model(d['target'])}",
        f"draft       {_model(d['draft'])}",
        f"settings    {_settings(d['settings'])}",
    ]
    if d.get("chat"):
        typed = json.dumps(d["chat"].get("user", ""), ensure_ascii=False)
        lines.append(f"chat        the prompt is a user turn of the chat template, "
                     f"{d['chat'].get('why', '')}; typed: {typed[:70]}")  # fmt: skip
    if d.get("dtype_choice"):
        lines.append(f"dtype       {d['dtype_choice'].get('dtype')}: --dtype auto, "
                     f"{d['dtype_choice'].get('why', '')}")  # fmt: skip
    if d.get("greedy_diff"):
        from specviz.core.trace.extras.greedy_diff import GreedyDiff

        diff = d["greedy_diff"]
        text = GreedyDiff.from_value(diff).text(d["target"]["dtype"])
        lines.append(f"greedy      round {diff['round']} (from 0): {text}")
    if d["lossy"]:
        lines.append(f"LOSSY       {LOSSY_WARNING.format(rule=d['settings']['verifier'])}")
    if not d["valid"]:
        lines.append(f"rounds      {d['rounds']}  (no figures: the trace is not valid)")
    else:
        lines += _figures(d)
    for warning in d["warnings"]:
        lines.append(f"warning     {warning}")
    lines.append("valid       " + ("yes" if d["valid"] else "NO (see the problems below)"))
    return "\n".join(lines)


def _problem_lines(path: str, problems: list) -> str:
    count = f"{len(problems)}{'+' if len(problems) >= MAX_PROBLEMS else ''}"
    lines = [f"{path} is not a valid trace: {count} problem(s)"]
    lines += [f"  {p}" for p in problems[:SHOWN_PROBLEMS]]
    if len(problems) > SHOWN_PROBLEMS:
        lines.append(f"  ... and {len(problems) - SHOWN_PROBLEMS} more (--json lists them)")
    return "\n".join(lines)


def _progress(doing: str) -> Callable[[float], None] | None:
    """A progress line on a terminal's stderr ("reading the trace:  42%"); None elsewhere."""
    if not sys.stderr.isatty():
        return None

    def report(fraction: float) -> None:
        print(f"\r[specviz] {doing}: {fraction:4.0%}", end="", file=sys.stderr, flush=True)
        if fraction >= 1:
            print(file=sys.stderr)

    return report


class _Reading:
    """What `inspect` keeps of the rounds it reads, one at a time (core.trace.files.stream):
    the summary's fold (its cost model holds a window of rounds), the settings changes, each
    round's judged fates as bytes (for the what-if) and the last round's finish. A few dozen
    bytes a round, whatever the round's line held."""

    def __init__(self, header) -> None:
        from specviz.core.metrics.running import SummaryFold

        self.fold = SummaryFold(header)
        self.previous = header.settings
        self.changes: list[dict] = []
        self.fates: list[bytes] = []
        self.k = 0
        self.rounds = 0
        self.finish: str | None = None
        self.greedy_diff: dict | None = None  # the first round's that names one, and its index

    def add(self, rnd) -> None:
        from specviz.core.metrics.costmodel import round_k
        from specviz.core.metrics.positions import judged_fates

        self.fold.add(rnd)
        self.rounds += 1
        self.finish = rnd.finish_reason
        if rnd.greedy_diff is not None and self.greedy_diff is None:
            self.greedy_diff = {**rnd.greedy_diff.to_json(), "round": rnd.index}
        if rnd.settings is not None and rnd.settings != self.previous:
            self.changes.append({"round": rnd.index, "settings": dataclasses.asdict(rnd.settings)})
            self.previous = rnd.settings
        self.fates.append(bytes(judged_fates(rnd)))
        self.k = max(self.k, round_k(rnd))


def run(args: argparse.Namespace) -> int:
    from specviz.cli.terminal import printable, printable_fields
    from specviz.core.trace.check_session import check_stream
    from specviz.core.trace.files import stream
    from specviz.core.trace.records import TraceError
    from specviz.core.trace.tempfiles import remove_stale_temps

    path = args.trace
    remove_stale_temps(Path(path).parent)  # what a killed save to that folder left
    try:
        # A round at a time: checked, folded into the figures and let go, so the memory
        # does not grow with the file (a 1M-round trace is read in what its figures need).
        items = stream(path, progress=_progress("reading and checking the trace"))
        session = next(items)
        reading = _Reading(session.header)
        problems = check_stream(session.header, items, limit=MAX_PROBLEMS, on_round=reading.add)
    except StopIteration:
        return fail(f"{path} is not a valid trace: the file is empty: no session header")
    except TraceError as e:
        if args.json:
            problem = {"line": e.line, "field": e.field_name, "message": str(e)}
            print(json.dumps({"valid": False, "file": path, "problems": [problem]}))
        return fail(f"{path} is not a valid trace: {e}")
    except OSError as e:
        return fail(f"cannot read {path}: {e.strerror or e}")
    report = describe(session, problems, reading)
    if args.json:
        # ASCII (no C1 control reaches a terminal) and strict: NaN and infinities as null
        print(json.dumps(strict_json({"file": path, **report}), allow_nan=False))
    else:  # every string from the trace escaped: no control sequence reaches the terminal
        print(format_report(printable(path, keep_lines=False), printable_fields(report)))
    if problems:
        return fail(_problem_lines(path, problems))
    return 0
