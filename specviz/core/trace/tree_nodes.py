"""A token tree's shape as one typed value: parents, each node's depth and children, computed
once (TreeNodes); a tree round's record (core.trace.extras.tree.TokenTree) reads its shape
through it. The one place a node's depth and a node's children are computed: the engine's
tree passes (core.tree.attention, core.drafters.tree_draft), the metrics, the trace's
checks and the window's tree all read them from here. Pure Python, no torch.

Depth: a child of the context is at depth 1, its children at 2, ... (so that depth d is the
d-th drafted position, as a chain's position d); the context itself is at depth 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

ROOT = -1  # the context: every tree's root, a parent of -1


def node_depths(parents: Sequence[int]) -> list[int]:
    """Each node's depth (1: a child of the context); parents come before children.
    ValueError for a parent that is not an earlier node (or ROOT)."""
    out: list[int] = []
    for i, parent in enumerate(parents):
        if not ROOT <= parent < i:
            raise ValueError(f"node {i}: parent {parent} is not an earlier node (or -1)")
        out.append(1 if parent == ROOT else out[parent] + 1)
    return out


def children_of(parents: Sequence[int]) -> dict[int, list[int]]:
    """{node (ROOT: the context): its children in order}."""
    out: dict[int, list[int]] = {}
    for i, parent in enumerate(parents):
        out.setdefault(parent, []).append(i)
    return out


@dataclass(frozen=True)
class TreeNodes:
    """A tree's shape: parents (ROOT or an earlier node), depths and children, once."""

    parents: tuple[int, ...]
    depths: tuple[int, ...]  # per node, 1: a child of the context
    children: Mapping[int, tuple[int, ...]]  # {node (ROOT: the context): its children}

    @classmethod
    def of(cls, parents: Sequence[int]) -> TreeNodes:
        kids = {node: tuple(c) for node, c in children_of(parents).items()}
        return cls(tuple(parents), tuple(node_depths(parents)), kids)

    def __len__(self) -> int:
        return len(self.parents)

    @property
    def depth(self) -> int:
        """The deepest node's depth (the tree's levels); 0 for no nodes."""
        return max(self.depths, default=0)

    def kids(self, node: int) -> tuple[int, ...]:
        return self.children.get(node, ())


def tree_levels(parents: Sequence[int]) -> int:
    """The tree's levels (its deepest node's depth); 0 for no nodes or a malformed tree
    (the trace's checks name it: core.trace.extras.tree.check_tree)."""
    try:
        return TreeNodes.of(parents).depth
    except (ValueError, TypeError):
        return 0
