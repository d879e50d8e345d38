"""A tree round as the view draws it: the context (the root), every drafted node of
Round.tree, and the round's own token (resampled or bonus) as a last node after the accepted
path; and which nodes are on the chain view (Round.tokens). Pure Python, no Qt.
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.core.trace.records import Round
from specviz.core.trace.tree_nodes import ROOT, TreeNodes

CONTEXT = "context"  # the root's fate: the tokens before the round
ENDINGS = ("resampled", "bonus")  # the fates of the round's own token


@dataclass(frozen=True)
class TreeNode:
    """One node of the drawn tree."""

    key: int  # ROOT, a drafted node's index in Round.tree, or the round's own token (n)
    parent: int | None  # None for the root
    depth: int  # 0 for the root
    fate: str  # CONTEXT, a drafted node's fate (TREE_FATES) or one of ENDINGS
    text: str  # a model's text: untrusted, shown as plain text only
    order: int  # 1-based place among its parent's drafted children (0: root, own token)


@dataclass(frozen=True)
class RoundTree:
    """The nodes of one tree round, and how they map onto its chain view."""

    rnd: Round
    nodes: dict[int, TreeNode]  # by key: the root, the drafted nodes, the own token
    children: dict[int, list[int]]  # drafted children of each node, in the order tried
    path: tuple[int, ...]  # the accepted nodes, root to leaf
    final: int | None  # key of the round's own token (None: the round ended on end-of-text)
    chain: dict[int, int]  # node key -> index into rnd.tokens, for the chain view's nodes

    @property
    def n(self) -> int:
        """Drafted nodes."""
        return len(self.rnd.tree.parent)

    def column(self, name: str, key: int):
        """A drafted node's value in Round.tree's column `name` (None for the others)."""
        return getattr(self.rnd.tree, name)[key] if 0 <= key < self.n else None

    def node_at(self, token_index: int) -> int | None:
        """The node drawn for rnd.tokens[token_index] (None if none is)."""
        for key, index in self.chain.items():
            if index == token_index:
                return key
        return None

    @property
    def parents(self) -> list[int]:
        """Each non-root node's parent, drafted nodes first, then the own token: the
        layout's input (layout.layout)."""
        keys = sorted(k for k in self.nodes if k != ROOT)
        return [self.nodes[k].parent for k in keys]


def round_tree(rnd: Round) -> RoundTree | None:
    """The drawn tree of a tree round (None for a chain round)."""
    tree = rnd.tree
    if tree is None:
        return None
    parents, fates, texts = tree.parent, tree.fate, tree.text
    n = len(parents)
    shape = TreeNodes.of(parents)
    kids = shape.children
    nodes = {ROOT: TreeNode(ROOT, None, 0, CONTEXT, "", 0)}
    for i, parent in enumerate(parents):
        order = kids[parent].index(i) + 1
        nodes[i] = TreeNode(i, parent, shape.depths[i], fates[i], texts[i], order)
    path, node = [], ROOT
    while True:  # the accepted child of each node reached, from the root
        entered = next((c for c in kids.get(node, []) if fates[c] == "accepted"), None)
        if entered is None:
            break
        path.append(entered)
        node = entered
    tokens = rnd.tokens
    chain: dict[int, int] = {}
    for j, key in enumerate(path):
        if j < len(tokens) and tokens[j].status == "accepted":
            chain[key] = j
    ended_on = kids.get(node, [])  # the children tried last: every one rejected
    last_rejected = ended_on[-1] if ended_on else None
    j = len(path)
    if (last_rejected is not None and j < len(tokens) and tokens[j].status == "rejected"
            and tokens[j].id == tree.token[last_rejected]):  # fmt: skip
        chain[last_rejected] = j
    final = None
    if tokens and tokens[-1].status in ENDINGS:
        final = n
        own = tokens[-1]
        nodes[n] = TreeNode(n, node, nodes[node].depth + 1, own.status, own.text, 0)
        chain[n] = len(tokens) - 1
    return RoundTree(rnd, nodes, kids, tuple(path), final, chain)
