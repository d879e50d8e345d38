"""A token tree from the draft model, one draft forward per level on its own cache.

The root's children come from the draft's q after the context; then each level's nodes that
get children are fed together, each seeing the context and its own ancestors (a 4-D mask,
core.tree.attention.tree_forward). A node gets up to `width` children:
- draw "sample": i.i.d. draws from q there (duplicates kept: the rule needs the draws as
  drawn), or "topk": q's top `width` tokens (distinct);
- shape "full": every node of a level gets children, breadth first, until `budget` nodes;
  "dynamic" (EAGLE-2): only the `width` nodes of the level with the highest cumulative
  draft probability (the product of q along the path) get children.
Under greedy decoding (T = 0) q is one-hot: the children are the top `width` of the draft's
raw softmax instead, and the rule is "topk" (the longest path the target's argmax takes).

A node's children are never pruned after they are drawn (core.tree.walk says why);
an end-of-text node gets none (nothing after it can be emitted). The shape asked for
(TreeShape) and the round's Proposal are core.decoding.proposal's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import DynamicCache

from specviz.core.decoding.forward import forward
from specviz.core.decoding.proposal import Proposal, TreeShape
from specviz.core.decoding.warp import SamplingConfig, sample, warp
from specviz.core.tree.attention import keep_positions, tree_forward


@dataclass
class TreeDraft:
    """A tree being drafted, the drafter's own (mutable) record: nodes parents-first, the q
    each node's children were drawn from ({node, -1 for the root: q [V] float32}) and each
    fed node's position in the draft's cache; `proposal()` is what the round gets."""

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    q: dict[int, torch.Tensor] = field(default_factory=dict)
    rule: str = "sample"
    # {node: its position in the draft's cache}: the nodes fed to the draft this round
    slots: dict[int, int] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)  # Round extras (suffix: "matched")

    def proposal(self) -> Proposal:
        """The round's Proposal of this tree (a tree's stop reason is "k": the engine says
        "limit" when its depth was cut short)."""
        return Proposal(list(self.tokens), list(self.parents), dict(self.q), "k",
                        dict(self.extras), self.rule)  # fmt: skip


def _children(logits: torch.Tensor, q: torch.Tensor, n: int, rule: str, greedy: bool,
              generator) -> list[int]:  # fmt: skip
    if rule == "sample":
        return [sample(q.double(), generator) for _ in range(n)]
    scores = torch.softmax(logits.float(), -1) if greedy else q
    return torch.topk(scores, min(n, int((scores > 0).sum()))).indices.tolist()


def draft_tree(
    model: torch.nn.Module,
    cache: DynamicCache,
    feed: list[int],
    shape: TreeShape,
    config: SamplingConfig,
    generator: torch.Generator,
    vocab: int,
    eos: int | None,
) -> TreeDraft:
    """A tree after the context: `feed` (>= 1 token) catches the cache up to it, then one
    forward per level. The cache ends holding the context and the fed nodes (its slots);
    keep_tree_path cuts it back to the accepted ones."""
    out = TreeDraft(rule=shape.rule(config))
    logits = forward(model, feed, cache, vocab, keep=1)  # [1, V]
    context = cache.get_seq_length()
    frontier = [-1]
    cumulative = {-1: 0.0}  # log of the product of q along the path
    for level in range(shape.depth):
        room = shape.budget - len(out.tokens)
        chosen = _expanded(frontier, cumulative, shape)[: math.ceil(room / shape.width)]
        if level:  # this level's parents, fed in one pass after the levels before
            logits = tree_forward(model, out.tokens, out.parents, chosen, out.slots, cache,
                                  vocab, context)  # fmt: skip
        grown = grow_level(out, chosen, logits, shape, config, generator, cumulative, eos)
        if not grown or len(out.tokens) >= shape.budget:
            break
        frontier = grown
    return out


def grow_level(out: TreeDraft, chosen: list[int], logits, shape: TreeShape,
               config: SamplingConfig, generator, cumulative: dict[int, float],
               eos: int | None) -> list[int]:  # fmt: skip
    """Give each chosen node its children (logits[row] is the draft's at chosen[row]), within
    the budget: out's tokens, parents and q grow, cumulative gets the children's log q
    along the path; the children that may grow further (not end-of-text) are returned."""
    grown = []
    for row, node in enumerate(chosen):
        room = shape.budget - len(out.tokens)
        q = warp(logits[row], config)  # [V]
        out.q[node] = q
        for token in _children(logits[row], q, min(shape.width, room), out.rule,
                               config.greedy, generator):  # fmt: skip
            out.tokens.append(token)
            out.parents.append(node)
            child = len(out.tokens) - 1
            cumulative[child] = cumulative[node] + math.log(max(float(q[token]), 1e-300))
            if token != eos:
                grown.append(child)
    return grown


def _expanded(frontier: list[int], cumulative: dict[int, float], shape: TreeShape) -> list[int]:
    """The nodes of a level that get children, in the level's order: all (full), or the
    `width` likeliest (dynamic)."""
    if shape.shape == "full":
        return frontier
    ranked = sorted(frontier, key=lambda node: -cumulative[node])  # stable: ties by order
    best = set(ranked[: shape.width])
    return [node for node in frontier if node in best]


def keep_tree_path(cache: DynamicCache, tree: TreeDraft, context: int,
                   path: tuple[int, ...]) -> None:  # fmt: skip
    """Cut the draft's cache to the context's `context` positions and the accepted nodes it
    was fed (a prefix of the path: a fed node's ancestors were fed before it)."""
    kept = []
    for node in path:
        if node not in tree.slots:
            break
        kept.append(tree.slots[node])
    keep_positions(cache, [*range(context), *kept])
