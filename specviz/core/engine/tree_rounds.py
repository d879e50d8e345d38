"""A tree round's shape (settings.tree_width > 1) for core.engine.round_step's one round.

K = the tree's depth from the policy; the drafter proposes a tree on its own cache
(core.drafters.tree_draft); the target scores the last token and every node in one pass and
the multi-draft rule judges them (core.tree.verifier); both caches keep the accepted path
only. Its records are the chain view and every node (core.tree.events).
"""

from __future__ import annotations

from typing import Any

from specviz.core.decoding.verifier import verifier_for
from specviz.core.decoding.warp import SamplingConfig
from specviz.core.drafters.tree_draft import TreeProposal, TreeShape
from specviz.core.engine.round_step import Verified
from specviz.core.trace.records import TokenEvent
from specviz.core.tree.events import tree_events


class TreeStep:
    """A token tree's round: drafted to depth K, judged by the multi-draft rule."""

    def draft(self, engine, policy_k: int, config: SamplingConfig) -> tuple[TreeProposal, str]:
        depth = engine.room(policy_k)
        shape = TreeShape.of(engine.settings, depth)
        if depth:
            proposal = engine.drafter.propose_tree(engine.ids, shape, config, engine.generator)
        else:  # one token left: the target's own
            proposal = TreeProposal(rule=shape.rule(config), asked=False)
        return proposal, "k" if depth == policy_k else "limit"

    def verify(self, engine, proposal: TreeProposal, config: SamplingConfig) -> Verified:
        pair, tokens, parents = engine.pair, proposal.tokens, proposal.parents
        q_at = {node: q.to(pair.device) for node, q in proposal.q_at.items()}
        past = engine.t_cache.get_seq_length()
        verifier = verifier_for(engine.settings.verifier)  # "tree" (core.tree.verifier)
        p_rows, states = verifier.score(pair.target, engine.ids[-1], tokens, parents,
                                        engine.t_cache, pair.vocab_size, config,
                                        engine.drafter.target_layers)  # fmt: skip
        walk = verifier.judge(tokens, parents, p_rows, q_at, proposal.rule, engine.generator)
        return Verified(p_rows, q_at, states, walk.path, walk.next_token, walk, {}, past)

    def commit(self, engine, proposal: TreeProposal, verified: Verified, n_emitted: int) -> None:
        """The target's cache and the drafter's keep the accepted path; the drafter gets the
        target's states of the last token and the path's nodes, as the cache keeps them."""
        past, path = verified.past, verified.path
        verifier_for(engine.settings.verifier).commit(
            engine.t_cache, past, path, len(engine.ids) - 1
        )
        if proposal.asked:
            engine.drafter.keep_tree(path, len(engine.ids) - 1)
        if verified.states is not None:
            kept = [0, *(node + 1 for node in path)][: len(engine.ids) - 1 - past]
            engine.drafter.accept_states(verified.states[kept])

    def records(self, engine, proposal: TreeProposal, verified: Verified, n_emit: int,
                top_n: int) -> tuple[tuple[TokenEvent, ...], dict[str, Any]]:  # fmt: skip
        events, tree = tree_events(proposal.tokens, proposal.parents, verified.p, verified.q,
                                   verified.judgement, proposal.rule, n_emit, engine.text,
                                   top_n)  # fmt: skip
        return events, {"tree": tree}


TREE = TreeStep()
