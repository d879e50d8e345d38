"""The words of the tree view: a node's label, its hover text, the explanation of a clicked
node, and the round's line. Every string is plain text (a token's text is a model's: shown
escaped, never as markup). Pure Python, no Qt.
"""

from __future__ import annotations

from specviz.gui.distribution.text import token_label
from specviz.gui.stream.figures import fmt
from specviz.gui.tree.layout import ROOT
from specviz.gui.tree.model import CONTEXT, RoundTree

NODE_CHARS = 6  # a node's label: this many characters of its token, then "…"
CONTEXT_LABEL = "context"
RULES = {
    "sample": "min(1, p/q)",  # SpecInfer's multi-step speculative sampling
    "topk": "p",  # q's top children, chosen without randomness: kept with p alone
}
UPDATES = {
    "sample": "its parent's p was updated to norm(max(0, p - q))",
    "topk": "at its parent p(x) was set to 0 and renormalised",
}


def node_label(text: str) -> str:
    """A token as a node shows it: whitespace visible, control characters escaped, cut."""
    shown = token_label(text)
    return shown if len(shown) <= NODE_CHARS else shown[: NODE_CHARS - 1] + "\u2026"


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _quoted(text: str) -> str:
    return repr(text)  # quotes, and escapes: "\x1b" reads as \x1b


def _rule(tree: RoundTree) -> str:
    return tree.rnd.tree.rule


def _test(tree: RoundTree, key: int) -> str:
    """ "u 0.71 >= min(1, p/q) 0.40: rejected" for a tried node."""
    accept, u = tree.column("accept_prob", key), tree.column("u", key)
    kept = tree.nodes[key].fate == "accepted"
    relation = "<" if kept else ">="
    return (f"u {fmt(u)} {relation} {RULES[_rule(tree)]} {fmt(accept)}: "
            f"{'accepted' if kept else 'rejected'}")  # fmt: skip


def _where(tree: RoundTree, key: int) -> str:
    return f"node {key + 1} of {tree.n}, depth {tree.nodes[key].depth}"


def _numbers(tree: RoundTree, key: int) -> str:
    """p and q where the node was drawn, and p_tried if it was tried."""
    line = (f"p (target, where it was drawn) = {fmt(tree.column('p', key))}"
            f"   q (draft) = {fmt(tree.column('q', key))}")  # fmt: skip
    if tree.nodes[key].fate != "discarded":
        line += f"   p_tried = {fmt(tree.column('p_tried', key))}"
    return line


def tooltip(tree: RoundTree, key: int) -> str:
    """The hover text of a node (plain text)."""
    node = tree.nodes[key]
    rnd = tree.rnd
    if key == ROOT:
        return (
            f"the context: the {rnd.context_len} tokens before round {rnd.index + 1}\n"
            "its children are the first drafted tokens"
        )
    if node.fate in ("resampled", "bonus"):
        return "\n".join([f"{_quoted(node.text)}  {node.fate} (the round's own token)",
                          *_own_token(tree)])  # fmt: skip
    where = f"{_where(tree, key)}, round {rnd.index + 1}"
    lines = [f"{_quoted(node.text)}  {node.fate} ({where})", _numbers(tree, key)]
    if node.fate == "discarded":
        lines.append("never tried: discarded")
    else:
        lines.append(f"tried {ordinal(node.order)} at its parent (against p_tried): "
                     f"{_test(tree, key)}")  # fmt: skip
        if node.fate == "rejected":
            lines.append(f"then {UPDATES[_rule(tree)]}")
    lines.append("click: explain it" + ("; show its position" if key in tree.chain else ""))
    return "\n".join(lines)


def _own_token(tree: RoundTree) -> list[str]:
    event = tree.rnd.tokens[tree.chain[tree.final]]
    if event.status == "bonus":
        return [
            f"p (target) = {fmt(event.p)}",
            "the accepted path ended at a node without children: drawn from the target's "
            "p after it (a bonus token)",
        ]
    residual = "norm(max(0, p - q))" if _rule(tree) == "sample" else "the renormalised p"
    return [
        f"p (target) = {fmt(event.p)}   probability under the residual = {fmt(event.residual)}",
        f"every child of its parent was rejected: drawn from {residual}, the parent's p "
        "after their updates",
    ]


def _siblings(tree: RoundTree, key: int) -> str:
    node = tree.nodes[key]
    kids = tree.children.get(node.parent, [])
    others = [
        f"{ordinal(i + 1)} {_quoted(tree.nodes[k].text)} {tree.nodes[k].fate}"
        for i, k in enumerate(kids)
        if k != key
    ]
    return ("its siblings: " + ", ".join(others)) if others else "no siblings"


def explanation(tree: RoundTree, key: int) -> str:
    """What happened to a clicked node and to its siblings (plain text)."""
    node = tree.nodes[key]
    if key == ROOT:
        return tooltip(tree, key)
    if node.fate in ("resampled", "bonus"):
        head = f"{_quoted(node.text)}: the round's own token, {node.fate}"
        return "\n".join([head, *_own_token(tree)])
    rule = _rule(tree)
    head = f"{_quoted(node.text)}: {node.fate} ({_where(tree, key)})"
    parent = tree.nodes[node.parent]
    kids = tree.children[node.parent]
    if node.fate == "discarded":
        if parent.fate not in ("accepted", CONTEXT):
            why = f"its parent {_quoted(parent.text)} was {parent.fate}, so it was never reached"
        else:
            kept = next(k for k in kids if tree.nodes[k].fate == "accepted")
            why = (f"an earlier sibling, {_quoted(tree.nodes[kept].text)}, was accepted "
                   "first and entered")  # fmt: skip
        what = f"never tried: discarded: {why}"
    else:
        what = f"tried {ordinal(node.order)} at its parent: {_test(tree, key)}"
        if node.fate == "rejected":
            later = [k for k in kids[node.order :] if tree.nodes[k].fate != "discarded"]
            what += f"; {UPDATES[rule]}"
            if later:
                what += f" before its next sibling {_quoted(tree.nodes[later[0]].text)} was tried"
            elif tree.final is not None and tree.nodes[tree.final].parent == node.parent:
                own = tree.nodes[tree.final]
                what += f"; it was the last child: the round's token {_quoted(own.text)} "
                what += f"was {own.fate} from that p"
        elif tree.children.get(key):
            what += "; entered: its children were tried next"
        else:
            what += "; a leaf: the round's bonus token came from its p"
    lines = [head, what, _siblings(tree, key), _numbers(tree, key)]
    if node.fate != "discarded":
        lines.append("p_tried: x's p after its earlier siblings' updates at the parent")
    if key in tree.chain:
        lines.append("on the chain view: the stream and the distribution panel show it")
    return "\n".join(lines)


def round_line(tree: RoundTree) -> str:
    """The round's tree in one line (plain text)."""
    fates = tree.rnd.tree.fate
    counts = {f: fates.count(f) for f in ("accepted", "rejected", "discarded")}
    own = tree.nodes[tree.final].fate if tree.final is not None else "end-of-text"
    return (
        f"Round {tree.rnd.index + 1}: {tree.n} nodes, {counts['accepted']} accepted, "
        f"{counts['rejected']} rejected, {counts['discarded']} never tried; then {own} "
        f"\u00b7 rule {_rule(tree)}"
    )
