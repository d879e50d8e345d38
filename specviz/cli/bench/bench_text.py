"""A bench's table as text: markdown (Spec-Bench's leaderboard layout, then the rows in
full, then the per-question greedy check) and CSV (the rows)."""

from __future__ import annotations

import csv
import io

from specviz.cli.terminal import printable
from specviz.core.bench.table import OVERALL

CSV_FIELDS = (
    "category", "config", "questions", "mat", "mat_low", "mat_high", "speedup",
    "speedup_low", "speedup_high", "tokens_per_s", "target_tokens_per_s", "identical",
    "accepted_by_position", "alpha", "alpha_low", "alpha_high",
)  # fmt: skip


def cell(text: object) -> str:
    """Untrusted text (a category, a question id) safe in a markdown cell on a terminal."""
    return printable(str(text), keep_lines=False).replace("|", "\\|")


def _f(value, fmt: str = "{:.2f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def _ci(ci) -> str:
    return "" if ci is None else f" [{ci[0]:.2f}, {ci[1]:.2f}]"


def _positions(values) -> str:
    return " ".join(_f(v) for v in values) or "n/a"


def leaderboard(rows) -> list[str]:
    """A row per configuration, a column per category (speedup), then #MAT and the overall
    speedup with its interval: Spec-Bench's leaderboard."""
    cats = list(dict.fromkeys(r.category for r in rows if r.category != OVERALL))
    configs = list(dict.fromkeys(r.config for r in rows))
    at = {(r.category, r.config): r for r in rows}
    head = ["config", *(cell(c) for c in cats), "#MAT", "overall speedup [95%]"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for config in configs:
        overall = at.get((OVERALL, config))
        cells = [cell(config)]
        cells += [_f(getattr(at.get((c, config)), "speedup", None), "{:.2f}x") for c in cats]
        cells.append(_f(overall and overall.mat))
        speedup = _f(overall and overall.speedup, "{:.2f}x")
        cells.append(speedup + _ci(overall and overall.speedup_ci))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def detail(rows, greedy: bool) -> list[str]:
    head = ["category", "config", "questions", "#MAT [95%]", "alpha [95%]", "accepted at 1..K",
            "tokens/s", "target tokens/s", "speedup [95%]"]  # fmt: skip
    head += ["identical"] if greedy else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [
            cell(r.category), cell(r.config), str(r.questions), _f(r.mat) + _ci(r.mat_ci),
            _f(r.alpha) + _ci(r.alpha_ci), _positions(r.accepted_by_position),
            _f(r.tokens_per_s, "{:.1f}"),
            _f(r.target_tokens_per_s, "{:.1f}"), _f(r.speedup, "{:.2f}x") + _ci(r.speedup_ci),
        ]  # fmt: skip
        if greedy:
            cells.append(f"{r.identical}/{r.questions}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def greedy_lines(questions) -> list[str]:
    differ = [q for q in questions if q.greedy and q.difference is not None]
    checked = [q for q in questions if q.greedy]
    if not checked:
        return []
    if not differ:
        return [f"Greedy check: all {len(checked)} question runs emit the target alone's text."]
    lines = [f"Greedy check: {len(differ)} of {len(checked)} question runs differ from the "
             "target alone:"]  # fmt: skip
    for q in differ:
        d = q.difference
        lines.append(
            f"- question {cell(q.question_id)} ({cell(q.category)}), {cell(q.config)}: first "
            f"differs at turn {d.turn + 1}, token {d.position}"
        )
    return lines


def markdown(result, rows, questions, spec) -> str:
    s, session = result.settings, result.settings.settings
    mode = "greedy" if session.temperature == 0 else f"temperature {session.temperature:g}"
    n = len(result.questions)
    out = [
        f"## specviz bench: {cell(spec.target)}"
        + (f" / {cell(spec.draft)}" if spec.draft else "")
        + f", {n} question{'s' if n != 1 else ''}, {mode}, {session.max_new_tokens} new tokens a "
        f"turn{', chat template' if s.chat else ''}",
        "",
    ]
    if s.chat:
        why = s.chat_why or "asked for"
        raw = "; --no-chat: the raw text" if why.startswith("by default") else ""
        out += [f"The turns are user turns of the target's chat template, {cell(why)}{raw}.", ""]
    if result.cancelled:
        out += [f"Cancelled: {len(result.runs)} runs finished.", ""]
    if not rows:
        return "\n".join([*out, "No run finished: nothing to report."])
    out += ["Speedup against the target alone, per category:", "", *leaderboard(rows), ""]
    out += detail(rows, session.temperature == 0)
    out += [
        "",
        "#MAT: tokens per target pass, the bonus counted; alpha: accepted / judged drafts; "
        "accepted at i: rounds whose draft i was kept / rounds that drafted an i; tokens/s: "
        "mean over questions, wall time with prefill; speedup: mean tokens/s / the target "
        "alone's, interleaved per question; [95%]: bootstrap over questions.",
    ]
    greedy = greedy_lines(questions)
    if greedy:
        out += ["", *greedy]
    return "\n".join(out)


def csv_text(rows) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for r in rows:
        mat_ci, sp_ci = r.mat_ci or (None, None), r.speedup_ci or (None, None)
        alpha_ci = r.alpha_ci or (None, None)
        writer.writerow(
            _csv(v)
            for v in (
                r.category, r.config, r.questions, r.mat, *mat_ci, r.speedup, *sp_ci,
                r.tokens_per_s, r.target_tokens_per_s, r.identical,
                " ".join(_f(v, "{:.4f}") for v in r.accepted_by_position), r.alpha, *alpha_ci,
            )
        )  # fmt: skip
    return buffer.getvalue()


def _csv(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    text = str(value)
    # a cell a spreadsheet would run as a formula (untrusted category names)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text
