"""Where each node of a token tree goes: its depth (the column) and its row. Pure Python.

Leaves take consecutive rows in depth-first order (children in the order they were tried), a
node with children sits halfway between its first and last child. Two nodes at one depth
then cover disjoint runs of leaves, so their rows differ by at least one: boxes less than a
row high and a column wide never overlap, whatever the tree.
"""

from __future__ import annotations

from collections.abc import Sequence

from specviz.core.trace.tree_nodes import ROOT, TreeNodes, children_of


def layout(parents: Sequence[int]) -> dict[int, tuple[int, float]]:
    """{node: (depth, row)} for the root (ROOT, depth 0) and every node i, whose parent is
    parents[i] (ROOT or an earlier node). Rows run from 0 to the number of leaves - 1."""
    nodes = TreeNodes.of(parents)  # ValueError: a parent not an earlier node or the root
    kids = nodes.children
    depth = {ROOT: 0, **dict(enumerate(nodes.depths))}
    row: dict[int, float] = {}
    leaf = 0
    stack = [ROOT]
    while stack:  # depth-first, children in order: the leaves' rows
        node = stack.pop()
        below = kids.get(node)
        if below:
            stack.extend(reversed(below))
        else:
            row[node] = float(leaf)
            leaf += 1
    for node in [*range(len(parents) - 1, -1, -1), ROOT]:  # children before their parents
        below = kids.get(node)
        if below:
            row[node] = (row[below[0]] + row[below[-1]]) / 2
    return {node: (depth[node], row[node]) for node in [ROOT, *range(len(parents))]}


def leaves(parents: Sequence[int]) -> int:
    """How many rows the layout takes (at least one: the root alone)."""
    return max(1, len(parents) + 1 - len(children_of(parents)))
