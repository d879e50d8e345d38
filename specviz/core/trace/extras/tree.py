"""A token tree's round (schema 1.5, settings.tree_width > 1; the rule is core.tree.walk):
every drafted node in columns, parents before children, read from a line (structure:
columns of one length, bounded by MAX_TREE_BUDGET) and checked against its round (meaning,
check_tree below: its settings (width, budget, rule), its counts, one tree under the context
with parents before children, the accepted nodes a path, the multi-draft rule reproduced from
the recorded numbers, and the chain view's tokens the path's, with its nodes' numbers). A 1.5
to 1.8 tree round's tokens are read as 1.9 writes them (read_tokens).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from specviz.core.trace.extras.base import JUDGED, Extra, Found
from specviz.core.trace.records import (
    MAX_TREE_BUDGET,
    TREE_FATES,
    Round,
    SessionHeader,
    Settings,
    TokenEvent,
    TraceError,
)
from specviz.core.trace.tree_nodes import ROOT, TreeNodes

TRIED = ("p_tried", "accept_prob", "u")  # numbers in [0, 1] on tried nodes, null elsewhere
TOL = 1e-9
RULES = ("sample", "topk")
_INTS = ("parent", "token")
_UNIT = ("q", "p")  # numbers in [0, 1] on every node
COLUMNS = (*_INTS, "text", "fate", *_UNIT, *TRIED)


@dataclass(frozen=True)
class TokenTree(Extra):
    """A tree round's nodes, one entry per node in each column: "parent" (-1: a child of the
    context), "token", "text", "fate" (TREE_FATES), "q" (the draft's q(x) where it was
    drawn), "p" (the target's p(x) there, from its one pass), and for the nodes the rule
    tried, "p_tried" (x's probability under the distribution it was tried against, after its
    earlier siblings' updates), "accept_prob" and "u" (None on the others); and the rule,
    "sample" (SpecInfer's i.i.d. draws) or "topk" (q's top ones, EAGLE; greedy). The round's
    `tokens` read as a chain: the accepted path, the last rejected child where the round
    ended on one, then the resampled or bonus token."""

    key = "tree"
    since = (1, 5)

    rule: str
    parent: tuple[int, ...]
    token: tuple[int, ...]
    text: tuple[str, ...]
    fate: tuple[str, ...]
    q: tuple[float, ...]
    p: tuple[float, ...]
    p_tried: tuple[float | None, ...]
    accept_prob: tuple[float | None, ...]
    u: tuple[float | None, ...]

    @cached_property
    def nodes(self) -> TreeNodes:
        """Its shape, computed once: depths (1: a child of the context) and children.
        ValueError for a parent that is not an earlier node (checked: check_tree)."""
        return TreeNodes.of(self.parent)

    @classmethod
    def from_json(cls, value: dict[str, Any], line: int | None) -> TokenTree:
        rule = value.get("rule")
        if rule not in RULES:
            raise TraceError(f"{rule!r}: not a tree rule ({', '.join(RULES)})", line, "tree.rule")
        columns = {key: _column(value, key, line) for key in COLUMNS}
        if len({len(column) for column in columns.values()}) != 1:
            raise TraceError(f"{', '.join(COLUMNS)} must have one entry per node", line, "tree")
        return cls(rule, **columns)

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> TokenTree:
        """The engine's columns (core.tree.events.tree_record), as computed."""
        return cls(value["rule"], **{key: tuple(value[key]) for key in COLUMNS})

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, **{key: list(getattr(self, key)) for key in COLUMNS}}

    def tried_by_depth(self) -> list[tuple[int, bool]]:
        """(depth, accepted?) of each node the rule tried, in node order."""
        pairs = zip(self.nodes.depths, self.fate, strict=True)
        return [(d, fate == "accepted") for d, fate in pairs if fate != "discarded"]

    def chain(self) -> list[int]:
        """The nodes of the round's chain view (its judged tokens, in order): the accepted
        path from the root, then, where the round ended on a rejection, the last child tried
        at the node it ended on (every child of that node was tried and rejected)."""
        path, node = [], ROOT
        while (kept := next((c for c in self.nodes.kids(node) if self.fate[c] == "accepted"),
                            None)) is not None:  # fmt: skip
            path.append(kept)
            node = kept
        kids = self.nodes.kids(node)
        return [*path, kids[-1]] if kids else path

    def read_tokens(self, tokens: tuple[TokenEvent, ...]) -> tuple[TokenEvent, ...]:
        """The round's tokens as schema 1.9 writes them. From 1.5 to 1.8 a judged token's p
        was the probability its test used and, under topk, its q was 1: a tree round whose
        judged tokens carry no p_tried is such a round, and its tokens get that p as p_tried
        (that q as q_tried) and their node's p and q from the columns. Anything else is as
        read (a malformed tree, or a token that is not its node's, is check's to name)."""
        judged = [j for j, t in enumerate(tokens) if t.status in JUDGED]
        if not judged or any(t.p_tried is not None for t in tokens):
            return tokens
        try:
            chain = self.chain()
        except (ValueError, TypeError, IndexError):
            return tokens
        out = list(tokens)
        for j, node in zip(judged, chain, strict=False):
            event = out[j]
            if event.id != self.token[node] or event.p is None:
                return tokens
            tried = {"p": self.p[node], "p_tried": event.p}
            if self.rule == "topk":
                tried.update(q=self.q[node], q_tried=event.q)
            out[j] = dataclasses.replace(event, **tried)
        return tuple(out)

    @classmethod
    def check(cls, rnd: Round, settings: Settings, header: SessionHeader) -> Found:
        """Agrees with its settings, its counts, its tokens and the rule (check_tree); a
        chain's round has no tree and no token with p_tried (schema 1.9)."""
        if settings.tree or rnd.tree is not None or any(t.p_tried is not None for t in rnd.tokens):
            yield from check_tree(rnd, settings)


def _column(value: dict, key: str, line: int | None) -> tuple:
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
        if key in (*_UNIT, *TRIED) and not (
            (v is None and key in TRIED) or (type(v) in (int, float) and 0 <= v <= 1)
        ):
            raise TraceError(f"{v!r}: not a number in [0, 1]", line, where)
    return tuple(float(v) if key in (*_UNIT, *TRIED) and v is not None else v for v in column)


# ---------------------------------------------------------------- what a tree round must agree with
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
