"""A tree round's `tree` record (schema 1.5, records.Round.tree): read from a line
(structure: columns of one length, bounded by MAX_TREE_BUDGET) and checked against the
round (meaning: one tree under the context, parents before children, the accepted nodes a
path, the multi-draft rule reproduced from the recorded numbers, the chain view's tokens the
path's, with its nodes' numbers). The rule itself is core.tree.walk. read_tried reads a 1.8
or older tree round's tokens as 1.9 writes them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

from specviz.core.trace.records import (
    JUDGED,
    MAX_TREE_BUDGET,
    TREE_FATES,
    Round,
    Settings,
    TokenEvent,
    TraceError,
)
from specviz.core.trace.tree_nodes import TreeNodes, TreeRecord

Found = Iterator[tuple[str, str]]  # (field, message)
RULES = ("sample", "topk")
_INTS = ("parent", "token")
_UNIT = ("q", "p")  # numbers in [0, 1] on every node
_TRIED = ("p_tried", "accept_prob", "u")  # numbers in [0, 1] on tried nodes, null elsewhere
COLUMNS = (*_INTS, "text", "fate", *_UNIT, *_TRIED)
TOL = 1e-9


def _column(value: dict, key: str, line: int) -> list:
    column = value.get(key)
    if type(column) is not list or len(column) > MAX_TREE_BUDGET:
        raise TraceError(f"expected a list of at most {MAX_TREE_BUDGET} entries", line,
                         f"tree.{key}")  # fmt: skip
    for i, v in enumerate(column):
        where = f"tree.{key}[{i}]"
        if key in _INTS and type(v) is not int:
            raise TraceError(f"{v!r}: not an integer", line, where)
        if key == "text" and type(v) is not str:
            raise TraceError(f"{v!r}: not a string", line, where)
        if key == "fate" and v not in TREE_FATES:
            raise TraceError(f"{v!r}: not a node's fate ({', '.join(TREE_FATES)})", line, where)
        if key in (*_UNIT, *_TRIED) and not (
            (v is None and key in _TRIED) or (type(v) in (int, float) and 0 <= v <= 1)
        ):
            raise TraceError(f"{v!r}: not a number in [0, 1]", line, where)
    return [float(v) if key in (*_UNIT, *_TRIED) and v is not None else v for v in column]


def parse_tree(value: dict[str, Any] | None, line: int) -> dict[str, Any] | None:
    """A tree round's columns, each one entry per node, and its rule."""
    if value is None:
        return None
    rule = value.get("rule")
    if rule not in RULES:
        raise TraceError(f"{rule!r}: not a tree rule ({', '.join(RULES)})", line, "tree.rule")
    out: dict[str, Any] = {"rule": rule}
    for key in COLUMNS:
        out[key] = _column(value, key, line)
    if len({len(out[key]) for key in COLUMNS}) != 1:
        raise TraceError(f"{', '.join(COLUMNS)} must have one entry per node", line, "tree")
    return out


def read_tried(tokens: tuple[TokenEvent, ...], tree: dict | None) -> tuple[TokenEvent, ...]:
    """A tree round's tokens as schema 1.9 writes them. From 1.5 to 1.8 a judged token's p
    was the probability its test used and, under topk, its q was 1: a tree round whose judged
    tokens carry no p_tried is such a round, and its tokens get that p as p_tried (that q as
    q_tried) and their node's p and q from the tree's columns. Anything else is as read (a
    malformed tree, or a token that is not its node's, is check_tree's to name)."""
    judged = [j for j, t in enumerate(tokens) if t.status in JUDGED]
    if tree is None or not judged or any(t.p_tried is not None for t in tokens):
        return tokens
    try:
        chain = TreeRecord.of(tree).chain()
    except (ValueError, TypeError, IndexError):
        return tokens
    out = list(tokens)
    for j, node in zip(judged, chain, strict=False):
        event = out[j]
        if event.id != tree["token"][node] or event.p is None:
            return tokens
        tried = {"p": tree["p"][node], "p_tried": event.p}
        if tree["rule"] == "topk":
            tried.update(q=tree["q"][node], q_tried=event.q)
        out[j] = dataclasses.replace(event, **tried)
    return tuple(out)


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
    parents = tree["parent"]
    n = len(parents)
    deterministic = rnd.matched is not None and tree["rule"] == "topk"  # suffix decoding's
    if tree["rule"] != tree_rule(settings) and not deterministic:
        yield "tree.rule", f"{tree['rule']!r}, but these settings call for {tree_rule(settings)!r}"
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
    yield from _numbers(tree, tree["rule"])
    yield from _walk(rnd, tree, children)
    yield from _chain_numbers(rnd, tree)


def _numbers(tree: dict, rule: str) -> Found:
    """Tried nodes carry p_tried, accept_prob and u, the others none; the accept test."""
    for i, fate in enumerate(tree["fate"]):
        tried = [tree[key][i] for key in _TRIED]
        if fate == "discarded":
            if tried != [None] * 3:
                yield f"tree.u[{i}]", "numbers of a test on a node never tried (discarded)"
                return
            continue
        if None in tried:
            yield f"tree.u[{i}]", f"a {fate} node without the numbers of its test"
            return
        p_tried, accept, u = tried
        q = tree["q"][i]
        expected = p_tried if rule == "topk" else (min(1.0, p_tried / q) if q > 0 else
                                                    float(p_tried > 0))  # fmt: skip
        if not math.isclose(accept, expected, rel_tol=1e-6, abs_tol=TOL):
            what = "p_tried" if rule == "topk" else "min(1, p_tried / q)"
            yield f"tree.accept_prob[{i}]", f"{accept!r}, but {what} = {expected!r}"
            return
        if (u < accept) != (fate == "accepted"):
            yield f"tree.fate[{i}]", f"{fate!r}, but u {u!r} against {accept!r} says otherwise"
            return


def _walk(rnd: Round, tree: dict, children) -> Found:
    """The walk from the root: at each node reached, its children tried in order until one
    is accepted; what follows it and every node off the path untried."""
    fates, tokens = tree["fate"], tree["token"]
    expected = ["discarded"] * len(fates)
    node, path = -1, []
    while True:
        kids = children.get(node, [])
        first = kids[0] if kids else None
        if (
            first is not None
            and tree["p_tried"][first] is not None
            and not math.isclose(
                tree["p_tried"][first], tree["p"][first], rel_tol=1e-6, abs_tol=TOL
            )
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


def _chain_numbers(rnd: Round, tree: dict) -> Found:
    """The chain view's judged tokens carry their nodes' numbers: p, q, p_tried (schema 1.9:
    on every one), and q_tried = 1 under topk only (the rule tests x without q)."""
    judged = [(j, t) for j, t in enumerate(rnd.tokens) if t.status in JUDGED]
    nodes = TreeRecord.of(tree).chain()
    for (j, event), node in zip(judged, nodes, strict=False):
        if event.id != tree["token"][node]:
            return  # named by _walk
        q_tried = 1.0 if tree["rule"] == "topk" else None
        for name, due in (("p", tree["p"][node]), ("q", tree["q"][node]),
                          ("p_tried", tree["p_tried"][node]), ("q_tried", q_tried)):  # fmt: skip
            value = getattr(event, name)
            if (value is None) != (due is None) or (
                due is not None and not math.isclose(value, due, rel_tol=1e-6, abs_tol=TOL)
            ):
                yield f"tokens[{j}].{name}", f"{value!r}, but its node {node}'s is {due!r}"
                return
