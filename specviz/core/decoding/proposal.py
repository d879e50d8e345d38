"""What a round drafts, as data: the shape asked for (TreeShape) and what came back (Proposal).

A chain is a token tree of width 1. Every drafter answers a TreeShape (K as its depth; width
1 asks for a chain) with one Proposal: its nodes' tokens, each node's parent (-1: a child of
the context; a chain's node i is the child of node i - 1) and the q its children were drawn
from. Every Verifier (core.decoding.verifier) takes the same Proposal, chain or tree: the
chain rules (token, block, typical) read it as q rows [K, V] (`q_rows`), the tree rule walks
its parents. Here, below both the drafters and the rules, so that each may import it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from specviz.core.decoding.warp import SamplingConfig
from specviz.core.trace.tree_nodes import ROOT, node_depths


@dataclass(frozen=True)
class TreeShape:
    """What a round asks the drafter for: trace Settings' tree fields, with K as the depth.
    Width 1 is a chain of up to `depth` tokens (budget and draw then play no part)."""

    depth: int  # levels below the context (K); 0: nothing is drafted
    width: int = 1  # children per node, at most; 1: a chain
    budget: int = 16  # nodes in all, at most (a tree's)
    draw: str = "sample"  # "sample" | "topk": a tree's children drawn from q, or q's top ones
    shape: str = "full"  # "full" | "dynamic" (EAGLE-2: the likeliest nodes get children)

    @property
    def chain(self) -> bool:
        return self.width == 1

    def rule(self, config: SamplingConfig) -> str:
        """The multi-draft rule a tree's children's law calls for (core.tree.walk)."""
        return "topk" if self.draw == "topk" or config.greedy else "sample"

    @classmethod
    def of(cls, settings, depth: int) -> TreeShape:
        """The shape trace Settings ask for, `depth` levels deep (a chain when tree_width is 1)."""
        return cls(depth, settings.tree_width, settings.tree_budget, settings.tree_draw,
                   settings.tree_shape)  # fmt: skip


@dataclass(frozen=True)
class Proposal:
    """What a drafter proposed for one round: nodes parents-first, chain or tree."""

    tokens: list[int]  # the drafted nodes' tokens (a chain's: in order)
    parents: list[int]  # each node's parent: ROOT (-1, the context) or an earlier node
    # {node (ROOT: the context): the q [V] its children were drawn from}, for every node with
    # children: a chain's node i was drawn from q[i - 1]
    q: Mapping[int, torch.Tensor]
    stop: str  # why drafting stopped: "k", "eos", "threshold", "no_match" or "limit"
    # The Round's extras the drafter records (records.ROUND_EXTRAS: "copied_from" a lookup's
    # span, "matched" suffix decoding's match, "draft_pieces" a bridged draft's cut)
    extras: Mapping[str, Any] = field(default_factory=dict)
    # The children's law the tree rule judges by (core.tree.walk): "sample" (i.i.d. from q)
    # or "topk" (q's distinct top tokens); a chain's token is drawn from its q: "sample".
    rule: str = "sample"

    @classmethod
    def chain(cls, tokens: list[int], q: torch.Tensor | Sequence[torch.Tensor], stop: str,
              extras: Mapping[str, Any] | None = None) -> Proposal:  # fmt: skip
        """A chain of tokens, q [len(tokens), V] (or its rows): row i the q token i was drawn
        from, each token the child of the one before."""
        parents = list(range(ROOT, len(tokens) - 1))
        return cls(list(tokens), parents, dict(zip(parents, q, strict=True)), stop,
                   dict(extras or {}))  # fmt: skip

    @classmethod
    def empty(cls, stop: str, rule: str = "sample") -> Proposal:
        """Nothing drafted: the round's one token is the target's own."""
        return cls([], [], {}, stop, {}, rule)

    @property
    def is_chain(self) -> bool:
        """Each node the child of the one before (an empty proposal is a chain too)."""
        return all(parent == i - 1 for i, parent in enumerate(self.parents))

    @property
    def depth(self) -> int:
        """The levels below the context (a chain's: its length; 0: nothing drafted)."""
        if self.is_chain:
            return len(self.tokens)
        return max(node_depths(self.parents), default=0)

    def q_rows(self, vocab: int, device=None) -> torch.Tensor:
        """[n, V]: row i the q node i was drawn from (its parent's), what a chain rule reads."""
        if not self.tokens:
            return torch.zeros((0, vocab), device=device)
        return torch.stack([self.q[parent] for parent in self.parents])

    def to(self, device) -> Proposal:
        """The same proposal with its q on `device` (where the target's p is)."""
        return dataclasses.replace(self, q={node: q.to(device) for node, q in self.q.items()})
