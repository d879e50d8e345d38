"""The exact multi-draft rule on a token tree: walk it from the root, one node's children
at a time, and say every node's fate.

At a node whose target distribution is p (the root's: after the context; a kept node's: its
own row of the target's one pass), its children are tried in order:
- rule "sample" (SpecInfer, Miao et al. 2024, multi-step speculative sampling): children
  are i.i.d. draws from the draft's q there; a child x is kept with min(1, p(x)/q(x)); on a
  rejection p becomes norm(max(0, p - q)) before the next child;
- rule "topk" (EAGLE): children are distinct tokens chosen without randomness (q's top W);
  x is kept with the current p(x); on a rejection p(x) becomes 0 and p is renormalised.
A kept child is entered (its own p, its own children); when every child fails one token is
drawn from the last p ("resampled"); a kept node without children ends the round with a
bonus token from its p. Either way the emitted tokens follow the target's p exactly: at
each node the token that leaves it is distributed as that node's p, whatever its children.

What makes this exact is the children's law, not their number: which nodes get children
and how many may depend on anything the draft knows, but a node's drawn children must be
kept as drawn (all of them, in draw order). Dropping the least likely draws afterwards
(reranking sampled nodes) leaves children that are no longer i.i.d. from q, and the rule
above is then biased; core.drafters.tree_draft never does it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specviz.core.decoding.verify import residual_distribution
from specviz.core.decoding.warp import sample
from specviz.core.trace.tree_nodes import children_of

RULES = ("sample", "topk")


@dataclass(frozen=True)
class TreeWalk:
    """Every node's fate and the numbers its test used (None where it was not tried)."""

    fates: tuple[str, ...]  # "accepted", "rejected" or "discarded", per node
    p_tried: tuple[float | None, ...]  # x's probability under the p it was tried against
    accept_probs: tuple[float | None, ...]  # min(1, p/q) (sample) or p (topk)
    u: tuple[float | None, ...]  # the uniform draw of its test
    path: tuple[int, ...]  # the accepted nodes, root to leaf
    next_token: int
    next_status: str  # "resampled" or "bonus"
    next_dist: torch.Tensor  # the distribution next_token was drawn from [V], float64
    last_rejected: int | None  # the last child tried at the node the round ended on

    @property
    def tried(self) -> list[int]:
        return [i for i, fate in enumerate(self.fates) if fate != "discarded"]


def walk_tree(
    tokens: list[int],
    parents: list[int],
    p_rows: torch.Tensor,
    q_at: dict[int, torch.Tensor],
    rule: str,
    generator: torch.Generator | None = None,
) -> TreeWalk:
    """The rule from the root. p_rows [n + 1, V]: row 0 the target's p after the context,
    row i + 1 its p after node i (the one pass over the tree); q_at: {node (-1: the root):
    the draft's q [V] its children were drawn from}, for every node with children."""
    if rule not in RULES:
        raise ValueError(f"unknown tree rule {rule!r} (one of {', '.join(RULES)})")
    n = len(tokens)
    fates = ["discarded"] * n
    p_tried: list[float | None] = [None] * n
    accept: list[float | None] = [None] * n
    draws: list[float | None] = [None] * n
    kids = children_of(parents)
    path: list[int] = []
    node, p = -1, p_rows[0].double()
    last_rejected = None
    while True:
        children = kids.get(node, [])
        if not children:  # a kept leaf (or nothing drafted): the bonus token from its p
            p = p / p.sum()
            status = "bonus"
            break
        q = q_at[node].double()
        entered = None
        for child in children:
            x = tokens[child]
            u = float(torch.rand((), generator=generator, dtype=torch.float64))
            p_x = float(p[x])
            if rule == "topk":
                a = p_x
            else:
                q_x = float(q[x])
                a = min(1.0, p_x / q_x) if q_x > 0 else float(p_x > 0)
            p_tried[child], accept[child], draws[child] = p_x, a, u
            if u < a:
                entered = child
                break
            fates[child] = "rejected"
            last_rejected = child
            if rule == "topk":
                p = p.clone()
                p[x] = 0.0
                p = p / p.sum()  # a rejection needs p(x) < 1: mass is left
            else:
                p = residual_distribution(p, q)
        if entered is None:  # every child failed: one token from the last p
            status = "resampled"
            break
        fates[entered] = "accepted"
        path.append(entered)
        last_rejected = None
        node, p = entered, p_rows[entered + 1].double()
    token = sample(p, generator)
    return TreeWalk(
        tuple(fates), tuple(p_tried), tuple(accept), tuple(draws), tuple(path), token, status,
        p, last_rejected,
    )  # fmt: skip
