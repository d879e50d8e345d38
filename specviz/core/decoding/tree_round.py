"""One speculative round on a token tree, end to end but outside the engine (its drafter,
records and views are to come): the draft proposes a tree of `width` children per node to
`depth` levels, the target scores every node in one pass (core.decoding.tree), and the exact
multi-draft rule walks it from the root (core.lab.multidraft is its lab version).

At a node whose target distribution is p, its children are tried in order:
- draw "sample" (SpecInfer): children are i.i.d. draws from the draft's q there; a child x is
  kept with min(1, p(x)/q(x)); on a rejection p becomes norm(max(0, p - q));
- draw "topk" (EAGLE): children are q's top-W tokens; x is kept with the current p(x); on a
  rejection p(x) becomes 0 and p is renormalised.
A kept child is entered (its own p, its own children); if every child fails, one token is
drawn from the last p ("resampled"); a kept leaf ends with a bonus token from its p. The
emitted tokens follow the target's p exactly, as the chain's do.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from specviz.core.decoding.forward import forward
from specviz.core.decoding.tree import score_tree
from specviz.core.decoding.verify import residual_distribution
from specviz.core.decoding.warp import SamplingConfig, sample, warp

DRAWS = ("sample", "topk")


@dataclass(frozen=True)
class TreeRound:
    tokens: tuple[int, ...]  # the nodes' tokens, parents before children
    parents: tuple[int, ...]  # -1: a child of the context
    kept: tuple[int, ...]  # the accepted path (node indexes, root to leaf)
    next_token: int
    next_status: str  # "resampled" or "bonus"

    @property
    def emitted(self) -> list[int]:
        return [*(self.tokens[i] for i in self.kept), self.next_token]


def _children(q: torch.Tensor, width: int, draw: str, generator) -> list[int]:
    if draw == "topk":
        return torch.topk(q, min(width, int((q > 0).sum()))).indices.tolist()
    return [sample(q.double(), generator) for _ in range(width)]


def draft_tree(draft, context: list[int], width: int, depth: int, vocab: int,
               config: SamplingConfig, draw: str, generator):  # fmt: skip
    """(tokens, parents, q per parent: {node or -1: q [V]}) of a full tree, breadth first.
    Each node's draft distribution comes from a fresh forward of its path (slow, simple)."""
    tokens: list[int] = []
    parents: list[int] = []
    q_at: dict[int, torch.Tensor] = {}
    frontier = [-1]
    for _ in range(depth):
        grown = []
        for node in frontier:
            path = []
            i = node
            while i >= 0:
                path.append(tokens[i])
                i = parents[i]
            logits = forward(draft, context + path[::-1], DynamicCache(), vocab, keep=1)[0]
            q = warp(logits, config)
            q_at[node] = q
            for token in _children(q, width, draw, generator):
                tokens.append(token)
                parents.append(node)
                grown.append(len(tokens) - 1)
        frontier = grown
    return tokens, parents, q_at


@torch.inference_mode()
def tree_round(pair, context: list[int], width: int, depth: int, config: SamplingConfig,
               draw: str = "sample", generator=None) -> TreeRound:  # fmt: skip
    """One round from `context`: draft a tree, score it in one target pass, walk it."""
    if draw not in DRAWS:
        raise ValueError(f"unknown tree draw {draw!r} (one of {', '.join(DRAWS)})")
    vocab = pair.vocab_size
    tokens, parents, q_at = draft_tree(pair.draft, context, width, depth, vocab, config, draw,
                                       generator)  # fmt: skip
    cache = DynamicCache()
    p_root = warp(forward(pair.target, context, cache, vocab, keep=1)[0], config)
    p_after = warp(score_tree(pair.target, tokens, parents, cache, vocab), config)  # [n, V]
    kept: list[int] = []
    node, p = -1, p_root.double()
    while True:
        children = [i for i, parent in enumerate(parents) if parent == node]
        if not children:  # a kept leaf: the bonus token from its p
            return TreeRound(tuple(tokens), tuple(parents), tuple(kept), sample(p, generator),
                             "bonus")  # fmt: skip
        q = q_at[node].double()
        entered = None
        for child in children:
            x = tokens[child]
            u = float(torch.rand((), generator=generator, dtype=torch.float64))
            if draw == "topk":
                if u < float(p[x]):
                    entered = child
                    break
                p = p.clone()
                p[x] = 0.0
                p = p / p.sum()  # a rejection needs p(x) < 1: mass is left
            else:
                if u < min(1.0, float(p[x]) / float(q[x])):
                    entered = child
                    break
                p = residual_distribution(p, q)
        if entered is None:  # every child failed: one token from the last p
            return TreeRound(tuple(tokens), tuple(parents), tuple(kept), sample(p, generator),
                             "resampled")  # fmt: skip
        kept.append(entered)
        node, p = entered, p_after[entered].double()
