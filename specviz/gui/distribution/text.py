"""The words of the distribution panel: token labels, the paragraph that reads a position's
verdict out loud, and the hover text of one bar. Every string from a trace is escaped
before it goes into rich text. GUI thread only."""

from __future__ import annotations

import html

from specviz.core.drafters import registry
from specviz.core.metrics.position_bars import PositionBars
from specviz.gui import palette
from specviz.gui.stream.figures import fmt, fmt_pair

LABEL_CHARS = 16
# The main plot's title; at a discarded position whose p the trace recorded (schema 1.2's
# unjudged numbers) it says that no accept test used that p.
MAIN_TITLE = "p and q at this position"
UNJUDGED_TITLE = "p (never judged) and q"  # short: the summary says why


def main_title(bars: PositionBars | None) -> str:
    return UNJUDGED_TITLE if bars is not None and bars.p_never_judged else MAIN_TITLE


def token_label(text: str) -> str:
    """A token as an axis label: whitespace made visible, long ones shortened."""
    if text.startswith("(") and text.endswith(")"):
        return text  # "(everything else)"
    shown = text.replace(" ", "\u2423").replace("\n", "\u21b5").replace("\t", "\u21e5")
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in shown) or "\u2205"
    return shown if len(shown) <= LABEL_CHARS else shown[: LABEL_CHARS - 1] + "\u2026"


def row_text(bars: PositionBars, row: int) -> str:
    """The hover text of one bar row: the token and every number the trace has for it."""
    if not 0 <= row < bars.n_bars:
        return ""
    name = bars.labels[row]
    lines = [repr(name) if bars.ids[row] is not None else name]
    # unjudged: p from the target's pass at a discarded position, where no accept test ran
    unjudged = bars.p_never_judged
    missing = "no accept test here" if unjudged else "not known here"
    for label, values in (
        ("p (target, never judged)" if unjudged else "p (target)", bars.p),
        ("q (draft)", bars.q),
        ("min(p, q)", bars.min_pq),
        ("max(0, p \u2212 q)", bars.excess),
    ):
        value = values[row]
        lines.append(f"{label} = {fmt(value) if value is not None else missing}")
    if row == bars.drafted_bar:
        lines.append(f"the drafted token ({bars.drafted_event.status}){_tried(bars.drafted_event)}")
    if row == bars.emitted_bar and bars.emitted_event is not None:
        lines.append(f"the emitted token ({bars.emitted_event.status})")
    return "\n".join(lines)


def drafted_tag(bars: PositionBars) -> str:
    event = bars.drafted_event
    if event is None:
        return ""
    return {
        "accepted": "accepted \u25b8",
        "rejected": "rejected \u25b8",
        "discarded": "never judged \u25b8",
    }[event.status]


LENGTH_LIMIT = "the length limit left room for the target's own token alone"


def nothing_drafted(stop: str | None, drafter: str | None) -> str:
    """Why a round drafted nothing, in its drafter's words (DrafterSpec.no_match): a round's
    stop reason says which (a trace before schema 1.1 has none; its drafter was a model)."""
    try:
        no_match = registry.spec(drafter or "model").no_match
    except ValueError:  # a trace's drafter this version does not know
        no_match = None
    if stop == "no_match":
        return no_match or "the drafter found nothing to draft"
    if stop == "limit" or no_match is None:
        return LENGTH_LIMIT
    return f"{no_match}, or {LENGTH_LIMIT}"


def summary_html(bars: PositionBars | None, drafter: str | None = None) -> str:
    """One paragraph that reads the position's verdict out loud, numbers from core.
    drafter: the session's drafter kind (the header's), for why nothing was drafted."""
    if bars is None:
        return "Click a token in the stream to see the distributions at its position."
    drafted, emitted = bars.drafted_event, bars.emitted_event
    head = f"<b>Round {bars.round_index + 1}, position {bars.position + 1}</b>. "
    parts = []
    if drafted is not None:
        colour = palette.fate(drafted.status).foreground
        parts.append(
            f"The draft proposed <b style='color:{colour}'>{_quote(drafted.text)}</b> "
            f"with q = {fmt(drafted.q)}"
        )
        if bars.block is not None:
            weight, h, u = bars.block
            kept, below = bars.block_kept, u < h
            u_text, h_text = fmt_pair(u, h)
            here = (
                "so the block keeps the drafts up to here at least"
                if below
                else "which alone would not keep this draft"
            )
            parts.append(
                f"the target gives it p = {fmt(drafted.p)}; judged as a block (Sun et al.): "
                f"the running weight here is p_i = {fmt(weight)} and the chance of keeping the "
                f"block up to here h_i = {h_text}; the draw u = {u_text} "
                f"{'&lt;' if below else '&ge;'} {h_text}, {here}. The block keeps the drafts "
                f"up to the last position whose u &lt; h: {kept} of them, so this one is "
                f"<b style='color:{colour}'>{drafted.status}</b>. " + _token_wise(bars)
            )
        elif bars.typical_threshold is not None:
            t = bars.typical_threshold
            relation = "&gt;" if drafted.p is not None and drafted.p > t else "&le;"
            verdict = "accepted" if bars.accepted else "rejected"
            parts.append(
                f"the target gives it p = {fmt(drafted.p)}; judged by typical acceptance "
                f"(Medusa, LOSSY): accepted while p &gt; min(ε, δ e<sup>−H(p)</sup>) "
                f"= {fmt(t)}, whatever q is: p {relation} {fmt(t)}, "
                f"<b style='color:{colour}'>{verdict}</b>"
            )
        elif bars.test is not None:  # another rule's test, from its extra (position_test)
            parts.append(_rule_test(bars, colour))
        elif bars.accepted is not None:
            below = bars.u is not None and bars.u < bars.accept_prob
            relation = "&lt;" if below else "&ge;"
            verdict = "accepted" if bars.accepted else "rejected"
            u_text, a_text = fmt_pair(bars.u, bars.accept_prob)
            parts.append(
                f"the target gives it p = {fmt(drafted.p)}{_tried(drafted)}, so it is accepted "
                f"with probability {_kept_with(drafted)} = {a_text}; the draw u = {u_text} "
                f"{relation} {a_text}: <b style='color:{colour}'>{verdict}</b>"
            )
        elif bars.p_never_judged:  # unjudged: schema 1.2's p at a discarded position
            parts.append(
                "it came after the first rejection, so it was never judged: the target's "
                f"pass gave it p = {fmt(drafted.unjudged_p)} (the p bars), but no accept test "
                "ran on it, as an earlier draft of the round was rejected"
            )
        else:
            parts.append("it came after the first rejection, so it was never judged")
    if emitted is not None and emitted.status == "resampled":
        colour = palette.fate("resampled").foreground
        parts.append(
            f"in its place <b style='color:{colour}'>{_quote(emitted.text)}</b> was drawn "
            + (
                "from the block's residual norm(max(0, p_i P \u2212 Q))"
                if bars.block_kept is not None
                else "from p itself (no residual: why the rule is lossy)"
                if bars.typical
                else "from norm(max(0, p \u2212 q))"
            )
            + f" (probability {fmt(emitted.residual)})"
        )
    if emitted is not None and emitted.status == "bonus":
        colour = palette.fate("bonus").foreground
        why = (
            "nothing was drafted this round: "
            + html.escape(nothing_drafted(bars.round_stop, drafter), quote=False)
            if bars.round_drafted == 0
            else "all drafts were accepted"
        )
        parts.append(
            f"{why}, so the target's own p gave a bonus token "
            f"<b style='color:{colour}'>{_quote(emitted.text)}</b> (p = {fmt(emitted.p)})"
        )
    text = head + "; ".join(parts) + "."
    if bars.alpha is not None:
        text += (
            f"<br>\u03b1 = \u03a3 min(p, q) = <b>{fmt(bars.alpha)}</b>: the chance that a "
            f"token drafted here is accepted; 1 \u2212 \u03b1 = {fmt(bars.rejection_mass)} "
            "is the residual's mass."
        )
    return text


def _rule_test(bars: PositionBars, colour: str) -> str:
    """A rule's recorded test at the position (PositionTest), read out."""
    t, drafted = bars.test, bars.drafted_event
    mark, line = fmt_pair(t.mark, t.line)
    relation = ("&gt;" if t.passes else "&le;") if t.above else ("&lt;" if t.passes else "&ge;")
    name = f"{t.line_name} " if t.line_name else ""
    why = f"; {html.escape(t.why, quote=False)}" if t.why else ""
    return (
        f"the target gives it p = {fmt(drafted.p)}; judged by the round's rule "
        f"({html.escape(t.axis, quote=False)}){why}: {t.mark_name} = {mark} {relation} "
        f"{name}{line}: <b style='color:{colour}'>{drafted.status}</b>"
    )


def _tried(drafted) -> str:
    """What a tree's judged token was tested against where it is not its own p and q (schema
    1.9): a later sibling's p after the earlier siblings' rejections, topk's q_tried = 1."""
    said = []
    if drafted.p_tried is not None and drafted.p_tried != drafted.p:
        said.append(f"p_tried = {fmt(drafted.p_tried)}, x's p after its earlier siblings' "
                    "rejections")  # fmt: skip
    if drafted.q_tried is not None:
        said.append(f"q_tried = {fmt(drafted.q_tried)}, as it was chosen from q's top, not drawn")
    return f" (tested against {' and '.join(said)})" if said else ""


def _kept_with(drafted) -> str:
    """The accept probability's formula, in the names of what the test used."""
    p = "p_tried" if drafted.p_tried is not None and drafted.p_tried != drafted.p else "p"
    return f"min(1, {p}/{'q_tried' if drafted.q_tried is not None else 'q'})"


def _token_wise(bars: PositionBars) -> str:
    """What the token-wise rule, with the same draw, would have done at this position."""
    if bars.u is None or bars.accept_prob is None:
        return ""
    u_text, a_text = fmt_pair(bars.u, bars.accept_prob)
    below = bars.u < bars.accept_prob
    return (
        f"Token-wise, the same draw against this draft's own min(1, p/q): u = {u_text} "
        f"{'&lt;' if below else '&ge;'} {a_text}, a test it "
        + ("passes" if below else "fails: the token-wise rule stops at such a draft")
    )


def _quote(text: str) -> str:
    return html.escape(repr(text), quote=False)
