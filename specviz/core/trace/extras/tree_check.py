"""What a tree round's record must agree with (core.trace.extras.tree.TokenTree): its
settings (width, budget, rule), its counts, one tree under the context with parents before
children, the accepted nodes a path, the multi-draft rule (core.tree.walk) reproduced from
the recorded numbers, and the chain view's tokens the path's, with its nodes' numbers.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from specviz.core.trace.extras.base import JUDGED, Found
from specviz.core.trace.records import Round, Settings
from specviz.core.trace.tree_nodes import TreeNodes

if TYPE_CHECKING:
    from specviz.core.trace.extras.tree import TokenTree

TRIED = ("p_tried", "accept_prob", "u")  # numbers in [0, 1] on tried nodes, null elsewhere
TOL = 1e-9


def tree_rule(settings: Settings) -> str:
    """The rule a tree's children call for: q's top W (or greedy) "topk", draws "sample"."""
    return "topk" if settings.tree_draw == "topk" or settings.temperature == 0 else "sample"


def check_tree(rnd: Round, settings: Settings) -> Found:
    """A tree round's record agrees with its settings, its counts, its tokens and the rule."""
    tree = rnd.tree
    if not settings.tree:
        if tree is not None:
            yield "tree", "a tree in a round whose settings draft a chain (tree_width 1)"
        for j, event in enumerate(rnd.tokens):
            if event.p_tried is not None:
                yield f"tokens[{j}].p_tried", "present in a chain's round (tree rounds only)"
                return
        return
    if tree is None:
        yield "tree", "a tree round (tree_width > 1) without its tree"
        return
    parents = tree.parent
    n = len(parents)
    deterministic = rnd.matched is not None and tree.rule == "topk"  # suffix decoding's
    if tree.rule != tree_rule(settings) and not deterministic:
        yield "tree.rule", f"{tree.rule!r}, but these settings call for {tree_rule(settings)!r}"
        return
    if n > settings.tree_budget:
        yield "tree", f"{n} nodes, more than the budget of {settings.tree_budget}"
    for i, parent in enumerate(parents):
        if not -1 <= parent < i:
            yield f"tree.parent[{i}]", f"{parent}: not an earlier node (or -1, the context)"
            return
    nodes = TreeNodes.of(parents)
    children = nodes.children
    if rnd.k is not None and n and nodes.depth > rnd.k:
        yield "tree", f"{nodes.depth} levels deep, more than K = {rnd.k}"
    for node, kids in children.items():
        if len(kids) > settings.tree_width:
            yield (
                f"tree.parent[{kids[-1]}]",
                (
                    f"node {node} has {len(kids)} children, more than the width "
                    f"{settings.tree_width}"
                ),
            )
            return
    yield from _numbers(tree, tree.rule)
    yield from _walk(rnd, tree, children)
    yield from _chain_numbers(rnd, tree)


def _numbers(tree: TokenTree, rule: str) -> Found:
    """Tried nodes carry p_tried, accept_prob and u, the others none; the accept test."""
    for i, fate in enumerate(tree.fate):
        tried = [getattr(tree, key)[i] for key in TRIED]
        if fate == "discarded":
            if tried != [None] * 3:
                yield f"tree.u[{i}]", "numbers of a test on a node never tried (discarded)"
                return
            continue
        if None in tried:
            yield f"tree.u[{i}]", f"a {fate} node without the numbers of its test"
            return
        p_tried, accept, u = tried
        q = tree.q[i]
        expected = p_tried if rule == "topk" else (min(1.0, p_tried / q) if q > 0 else
                                                    float(p_tried > 0))  # fmt: skip
        if not math.isclose(accept, expected, rel_tol=1e-6, abs_tol=TOL):
            what = "p_tried" if rule == "topk" else "min(1, p_tried / q)"
            yield f"tree.accept_prob[{i}]", f"{accept!r}, but {what} = {expected!r}"
            return
        if (u < accept) != (fate == "accepted"):
            yield f"tree.fate[{i}]", f"{fate!r}, but u {u!r} against {accept!r} says otherwise"
            return


def _walk(rnd: Round, tree: TokenTree, children) -> Found:
    """The walk from the root: at each node reached, its children tried in order until one
    is accepted; what follows it and every node off the path untried."""
    fates, tokens = tree.fate, tree.token
    expected = ["discarded"] * len(fates)
    node, path = -1, []
    while True:
        kids = children.get(node, [])
        first = kids[0] if kids else None
        if (
            first is not None
            and tree.p_tried[first] is not None
            and not math.isclose(tree.p_tried[first], tree.p[first], rel_tol=1e-6, abs_tol=TOL)
        ):
            yield f"tree.p_tried[{first}]", "a first child is tried against p itself"
            return
        entered = next((c for c in kids if fates[c] == "accepted"), None)
        for c in kids:
            expected[c] = "rejected"
            if c == entered:
                expected[c] = "accepted"
                break
        if entered is None:
            break
        path.append(entered)
        node = entered
    for i, (fate, due) in enumerate(zip(fates, expected, strict=True)):
        if fate != due:
            yield f"tree.fate[{i}]", f"{fate!r}, but the walk from the root makes it {due!r}"
            return
    if rnd.n_accepted != len(path):
        yield "n_accepted", f"{rnd.n_accepted}, but the tree's accepted path has {len(path)}"
        return
    ending = "resampled" if children.get(node) else "bonus"
    chain = [tokens[i] for i in path]
    if ending == "resampled":
        chain.append(tokens[children[node][-1]])
    listed = [t.id for t in rnd.tokens if t.status != ending]
    if listed != chain[: len(listed)] or (len(listed) < len(chain) and rnd.finish_reason != "eos"):
        yield "tokens", "the chain view is not the tree's accepted path (and last rejected child)"
        return
    last = rnd.tokens[-1].status if rnd.tokens else None
    if last in ("resampled", "bonus") and last != ending:
        yield "tokens", f"the round ends on a {last!r} token, but its tree calls for {ending!r}"


def _chain_numbers(rnd: Round, tree: TokenTree) -> Found:
    """The chain view's judged tokens carry their nodes' numbers: p, q, p_tried (schema 1.9:
    on every one), and q_tried = 1 under topk only (the rule tests x without q)."""
    judged = [(j, t) for j, t in enumerate(rnd.tokens) if t.status in JUDGED]
    nodes = tree.chain()
    for (j, event), node in zip(judged, nodes, strict=False):
        if event.id != tree.token[node]:
            return  # named by _walk
        q_tried = 1.0 if tree.rule == "topk" else None
        for name, due in (("p", tree.p[node]), ("q", tree.q[node]),
                          ("p_tried", tree.p_tried[node]), ("q_tried", q_tried)):  # fmt: skip
            value = getattr(event, name)
            if (value is None) != (due is None) or (
                due is not None and not math.isclose(value, due, rel_tol=1e-6, abs_tol=TOL)
            ):
                yield f"tokens[{j}].{name}", f"{value!r}, but its node {node}'s is {due!r}"
                return
