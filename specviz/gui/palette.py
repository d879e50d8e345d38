"""Colours and names of token fates and of the distribution bars: the one place they live.

Every view (token stream, bars, plots) and the legend take their colours from here, so a
colour means the same thing everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fate:
    """How one token status is drawn."""

    label: str  # the legend's word for it
    foreground: str  # text colour, also the bar / highlight colour of this fate
    background: str  # a light tint behind the token
    struck: bool  # drawn struck through: drafted but not part of the output
    meaning: str  # one line for the legend's tooltip


FATES: dict[str, Fate] = {
    "accepted": Fate(
        "accepted", "#1b7a2e", "#dcf2e0", False, "drafted by q and accepted: u < min(1, p/q)"
    ),
    "rejected": Fate(
        "rejected", "#c62828", "#fde0e0", True, "drafted by q and rejected: u >= min(1, p/q)"
    ),
    "discarded": Fate(
        "discarded", "#8a8a8a", "#efefef", True, "drafted after the first rejection: never judged"
    ),
    "resampled": Fate(
        "resampled",
        "#c25e00",
        "#ffe9cc",
        False,
        "drawn from norm(max(0, p - q)) in place of the rejected token",
    ),
    "bonus": Fate(
        "bonus", "#1f5fbf", "#dde8fb", False, "all K drafts accepted: one more token from p, free"
    ),
}

PROMPT = "#333333"  # the prompt's text
PROMPT_BACKGROUND = "#f2f2f2"
BOUNDARY = "#9aa0a6"  # the marker between rounds
BOUNDARY_MARK = "\u2502"  # │ between rounds
SELECTED = "#ffd54f"  # the outline / background of the selected position
COPIED = "#b3e5fc"  # where a prompt-lookup proposal was copied from (the selected round's)
COPIED_LINE = "#0277bd"
CUT_DIFFERS = "#eadcf5"  # where a bridged draft cut its text unlike the target (draft_pieces)

# Distribution bars
P = "#1f5fbf"  # the target, p
Q = "#8e44ad"  # the draft, q
MIN_PQ = "#1b7a2e"  # min(p, q): accepted mass
EXCESS = "#c25e00"  # max(0, p - q): the residual's mass (same hue as "resampled")
REST = "#9aa0a6"
DRAFTED_BAND = "#fff3c4"  # behind the drafted token's bars
EMITTED_BAND = "#d9ecff"  # behind the emitted token's bars
ACCEPT_REGION = "#c8ebd0"  # u below the line: accepted
REJECT_REGION = "#f9d0d0"  # u above the line: rejected
U_MARK = "#111111"

# Plots
PLOT_ACCEPTANCE = "#1b7a2e"
PLOT_ALPHA = "#8e44ad"
PLOT_EFFICIENCY = "#8a8a8a"
PLOT_MEASURED = "#1f5fbf"
PLOT_PREDICTED = "#c25e00"
PLOT_PER_FORWARD = "#2a9d8f"
PLOT_HISTOGRAM = "#1b7a2e"


def fate(status: str) -> Fate:
    return FATES[status]


def _swatch(colour: str, text: str, outline: bool = False) -> str:
    mark = "\u25a1" if outline else "\u25a0"
    return f"<span style='color:{colour}; font-size:14pt'>{mark}</span>&nbsp;{text}"


def fate_legend_html(beyond: bool = False) -> str:
    """The stream's legend: every fate in its own colours, as the stream draws it; beyond:
    also the dotted mark of a draft accepted beyond the token-wise stop (block, typical rules)."""
    parts = []
    for f in FATES.values():
        style = f"color:{f.foreground}; background:{f.background};"
        if f.struck:
            style += " text-decoration: line-through;"
        parts.append(f"<span style='{style}'>&nbsp;{f.label}&nbsp;</span>")
    prompt = (
        f"<span style='color:{PROMPT}; background:{PROMPT_BACKGROUND};'>&nbsp;prompt&nbsp;</span>"
    )
    mark = f"<b style='color:{BOUNDARY}'>{BOUNDARY_MARK}</b> round start"
    if beyond:
        a, r = fate("accepted"), fate("rejected")
        parts.append(
            f"<span style='color:{a.foreground}; background:{a.background};'>&nbsp;"
            f"<u style='color:{r.foreground}'>\u2024\u2024\u2024</u>&nbsp;</span> "
            "dotted underline: accepted beyond where token-wise would have stopped"
        )
    return " ".join([prompt, *parts]) + f" &nbsp; {mark} &nbsp; <i>(hover: numbers; click)</i>"


def bar_legend_html() -> str:
    """The distribution panel's legend, in the bars' colours."""
    return " &nbsp; ".join(
        (
            _swatch(P, "p (target, outline)", outline=True),
            _swatch(Q, "q (draft)"),
            _swatch(MIN_PQ, "min(p, q): accepted mass"),
            _swatch(EXCESS, "max(0, p \u2212 q): residual mass"),
            _swatch(DRAFTED_BAND, "drafted"),
            _swatch(EMITTED_BAND, "emitted"),
        )
    )
