"""One round on a token tree (settings.tree_width > 1): the engine's tree step.

The same four steps as a chain's round (core.engine.speculative): K = the tree's depth from
the policy; the model drafter proposes a tree on its own cache (core.drafters.tree_draft);
the target scores the last token and every node in one pass and the multi-draft rule judges
them (core.tree.verifier); the emitted tokens are appended and both caches keep the
accepted path only. Then the records: the chain view and the tree (core.tree.events).
"""

from __future__ import annotations

import time

import torch

from specviz.core.decoding.verifier import verifier_for
from specviz.core.decoding.warp import SamplingConfig
from specviz.core.drafters.registry import check_tree_kind
from specviz.core.drafters.tree_draft import TreeProposal, TreeShape
from specviz.core.trace.records import Round
from specviz.core.tree.events import tree_events


def check_tree_drafter(drafter) -> None:
    """ValueError unless the drafter drafts trees (the model drafter)."""
    if not getattr(drafter, "drafts_trees", False):
        check_tree_kind(drafter.kind)  # its message; a kind that claims trees fails below
        raise ValueError(f"the {drafter.kind} drafter drafts chains only")


@torch.inference_mode()
def tree_step(engine, config: SamplingConfig) -> Round:
    """One tree round of `engine` (a SpeculativeEngine past prefill)."""
    settings, pair = engine.settings, engine.pair
    context_len = len(engine.ids)
    policy_k = engine.policy.next_k()
    depth = engine._limit_k(policy_k)

    clock = engine._clock()
    clock.mark()
    shape = TreeShape.of(settings, depth)
    if depth:
        proposal = engine.drafter.propose_tree(engine.ids, shape, config, engine.generator)
    else:  # one token left: the target's own
        proposal = TreeProposal(rule=shape.rule(config))
    clock.mark()
    tokens, parents = proposal.tokens, proposal.parents
    q_at = {node: q.to(pair.device) for node, q in proposal.q_at.items()}
    past = engine.t_cache.get_seq_length()
    verifier = verifier_for(settings.verifier)  # "tree" (core.tree.verifier)
    p_rows, states = verifier.score(pair.target, engine.ids[-1], tokens, parents,
                                    engine.t_cache, pair.vocab_size, config,
                                    engine.drafter.target_layers)  # fmt: skip
    walk = verifier.judge(tokens, parents, p_rows, q_at, proposal.rule, engine.generator)
    emitted, finish = engine._emit([*(tokens[node] for node in walk.path), walk.next_token])
    verifier.commit(engine.t_cache, past, walk.path, len(engine.ids) - 1)
    if depth:
        engine.drafter.keep_tree(walk.path, len(engine.ids) - 1)
    if states is not None:  # rows of the last token and the path's nodes, as the cache keeps
        kept = [0, *(node + 1 for node in walk.path)][: len(engine.ids) - 1 - past]
        engine.drafter.accept_states(states[kept])
    clock.mark()
    draft_ms, verify_ms = clock.spans()
    engine.policy.update(proposal.depth, len(walk.path))

    start = time.perf_counter()
    top_n = settings.top_n if engine.trace else 0
    events, tree = tree_events(tokens, parents, p_rows, q_at, walk, proposal.rule,
                               len(emitted), engine.text, top_n)  # fmt: skip
    events_ms = 1000 * (time.perf_counter() - start)
    engine.finish_reason = finish
    stop = "k" if depth == policy_k else "limit"
    rnd = Round(
        session_id=engine.header.session_id,
        index=engine.round_index,
        context_len=context_len,
        draft_ms=draft_ms,
        verify_ms=verify_ms,
        n_drafted=len(tokens),
        n_accepted=len(walk.path),
        tokens=events,
        settings=settings,
        finish_reason=finish,
        k=policy_k,
        stop=stop,
        events_ms=events_ms,
        probes=engine.prober.after_round(engine) if engine.probing else None,  # untimed
        tree=tree,
        matched=proposal.matched,
    )
    engine.round_index += 1
    return rnd
