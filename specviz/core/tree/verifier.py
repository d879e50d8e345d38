"""The tree verifier, core.trace.verifiers' "tree": core.decoding.verifier's protocol on a
token tree, SpecInfer's multi-draft rule or the EAGLE walk.

It scores the last emitted token and every drafted node in one target pass (a 4-D mask:
each node sees the context and its ancestors, core.tree.attention), judges the tree with the
exact multi-draft rule (core.tree.walk) and commits the target's cache to the
accepted path (index_select per layer), as a chain verifier crops it to the kept prefix. A
chain is a tree of width 1: this rule judges one too (Leviathan's rule, one draw a node).
"""

from __future__ import annotations

from specviz.core.decoding.verifier import Judgement, Verifier
from specviz.core.decoding.warp import warp
from specviz.core.tree.attention import keep_path, score_tree
from specviz.core.tree.events import tree_events
from specviz.core.tree.walk import walk_tree


class TreeVerifier(Verifier):
    kind = "tree"

    def score(self, target, last_token, proposal, cache, vocab, config, layers=()):
        """p [n + 1, V]: row 0 the target's warped p after the last emitted token, row i + 1
        its p after node i, in one pass with a 4-D mask."""
        tokens = [last_token, *proposal.tokens]
        shifted = [-1, *(parent + 1 for parent in proposal.parents)]  # the last token: root
        if not layers:
            return warp(score_tree(target, tokens, shifted, cache, vocab), config), None
        logits, states = score_tree(target, tokens, shifted, cache, vocab, layers)
        return warp(logits, config), states

    def judge(self, proposal, p, generator, settings=None):
        """Walk the tree (core.tree.walk) by the proposal's rule: "sample" (SpecInfer) or
        "topk" (EAGLE)."""
        walk = walk_tree(proposal.tokens, proposal.parents, p, proposal.q, proposal.rule,
                         generator)  # fmt: skip
        return Judgement(walk.path, walk.next_token, walk)

    def commit(self, cache, past, path, length):
        """Keep the context's `past` positions, the last token and the accepted nodes, then
        at most `length` positions (after an end-of-text token the path is cut short)."""
        keep_path(cache, past, [0, *(node + 1 for node in path)][: max(length - past, 0)])

    def events(self, proposal, p, judged, n_emit, text, top_n):
        """The chain view of the path and every node (Round.tree, core.tree.events)."""
        events, tree = tree_events(proposal.tokens, proposal.parents, p, proposal.q,
                                   judged.record, proposal.rule, n_emit, text,
                                   top_n)  # fmt: skip
        return events, {"tree": tree}
