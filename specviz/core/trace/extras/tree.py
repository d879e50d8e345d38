"""A token tree's round (schema 1.5, settings.tree_width > 1; the rule is core.tree.walk):
every drafted node in columns, parents before children, read from a line (structure:
columns of one length, bounded by MAX_TREE_BUDGET) and checked against its round (meaning,
core.trace.extras.tree_check). A 1.5 to 1.8 tree round's tokens are read as 1.9 writes them
(read_tokens).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from specviz.core.trace.extras.base import JUDGED, Extra, Found
from specviz.core.trace.extras.tree_check import TRIED, check_tree
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
        ValueError for a parent that is not an earlier node (checked: tree_check)."""
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
        """Agrees with its settings, its counts, its tokens and the rule (tree_check); a
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
