"""One speculative round on a full token tree from fresh forwards, outside the engine: the
reference the engine's tree rounds (core.engine.round_step) are tested against. The draft
proposes `width` children per node to `depth` levels, each node's q from a fresh forward of
its path; the target scores every node in one pass (core.tree.attention); the multi-draft
rule walks it (core.tree.walk; core.lab.multidraft is its lab version).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from specviz.core.decoding.forward import forward
from specviz.core.decoding.warp import SamplingConfig, sample, warp
from specviz.core.tree.attention import score_tree
from specviz.core.tree.walk import walk_tree

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
    p_rows = torch.cat([p_root[None], p_after])  # [n + 1, V]
    walk = walk_tree(tokens, parents, p_rows, q_at, draw, generator)
    return TreeRound(tuple(tokens), tuple(parents), walk.path, walk.next_token, walk.next_status)
