"""A token tree's shape as one typed value: parents, each node's depth and children, computed
once (TreeNodes), and a tree round's record read through it (TreeRecord, over Round.tree's
columns). The one place a node's depth and a node's children are computed: the engine's
tree passes (core.tree.attention, core.drafters.tree_draft), the metrics, the trace's
checks and the window's tree all read them from here. Pure Python, no torch.

Depth: a child of the context is at depth 1, its children at 2, ... (so that depth d is the
d-th drafted position, as a chain's position d); the context itself is at depth 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
    (the trace's checks name it: core.trace.tree_numbers)."""
    try:
        return TreeNodes.of(parents).depth
    except (ValueError, TypeError):
        return 0


@dataclass(frozen=True)
class TreeRecord:
    """A tree round's record (Round.tree, schema 1.5) as typed columns, one entry per node
    (records.Round.tree says what each holds), with its shape computed once."""

    rule: str
    nodes: TreeNodes
    token: tuple[int, ...]
    text: tuple[str, ...]
    fate: tuple[str, ...]
    q: tuple[float, ...]
    p: tuple[float, ...]
    p_tried: tuple[float | None, ...]
    accept_prob: tuple[float | None, ...]
    u: tuple[float | None, ...]

    @classmethod
    def of(cls, tree: Mapping[str, Any]) -> TreeRecord:
        """From Round.tree's columns (as the engine writes them and a trace reads back)."""
        columns = {key: tuple(tree.get(key, ())) for key in COLUMNS}
        return cls(tree.get("rule", "sample"), TreeNodes.of(tree.get("parent", ())), **columns)

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


COLUMNS = ("token", "text", "fate", "q", "p", "p_tried", "accept_prob", "u")


def tree_record(rnd) -> TreeRecord | None:
    """A round's tree record, typed (None for a chain's round)."""
    return None if rnd.tree is None else TreeRecord.of(rnd.tree)
