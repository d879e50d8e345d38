"""One round, whatever its proposal's shape: draft -> one target pass -> verify -> Round.

A chain is a token tree of width 1. The settings say the shape as data (a TreeShape: K
levels, width 1 for a chain; core.decoding.proposal); the drafter answers it with one
Proposal (nodes with parents, the q each was drawn from); the settings' Verifier
(core.decoding.verifier: token, block, typical or tree, the same four stages for each) scores
it in the target's one pass, judges it (the accepted path plus the round's own token),
commits the target's cache and writes the token records; the drafter keeps the path.
`run_round` is the engine's one place a Round is made (rounds.make_round, which the trace
reader shares).

Cache invariant between rounds (core.engine.speculative): `ids` holds prompt + emitted
tokens; the target's cache covers ids[:-1]; a drafter's, if it has one, a prefix of that.
"""

from __future__ import annotations

import dataclasses
import time

from specviz.core.decoding.proposal import Proposal, TreeShape
from specviz.core.decoding.verifier import verifier_for
from specviz.core.decoding.warp import SamplingConfig
from specviz.core.trace.records import Round
from specviz.core.trace.rounds import make_round


def run_round(engine, config: SamplingConfig) -> Round:
    """One round of `engine` (a SpeculativeEngine past prefill) in the shape its settings
    ask for (a chain, or a tree when tree_width > 1): draft and verify timed apart (the
    appending and the cache commits count as verification), then the token records, timed
    apart (events_ms); after the times, the cost probes and, in a greedy half-precision
    session, where the text first leaves the target alone's greedy decoding (greedy_diff)."""
    settings, pair, drafter = engine.settings, engine.pair, engine.drafter
    context_len = len(engine.ids)
    generated = engine.n_generated  # before the round: where its tokens start
    policy_k = engine.policy.next_k()
    verifier = verifier_for(settings.verifier)

    clock = engine.clock()
    clock.mark()
    proposal = draft(engine, TreeShape.of(settings, engine.room(policy_k)), policy_k, config)
    clock.mark()
    proposal = proposal.to(pair.device)  # a draft may live apart
    past = engine.t_cache.get_seq_length()
    p, states = verifier.score(pair.target, engine.ids[-1], proposal, engine.t_cache,
                               pair.vocab_size, config, drafter.target_layers)  # fmt: skip
    judged = verifier.judge(proposal, p, engine.generator, settings)
    path = judged.path
    emitted, finish = engine.emit([*(proposal.tokens[node] for node in path), judged.next_token])
    verifier.commit(engine.t_cache, past, path, len(engine.ids) - 1)
    drafter.observe(len(path), len(proposal.tokens))
    drafter.keep(path, len(engine.ids) - 1)
    if states is not None:  # the last token's row and the path's, one per emitted token
        drafter.accept_states(states[[0, *(node + 1 for node in path)][: len(emitted)]])
    clock.mark()
    draft_ms, verify_ms = clock.spans()
    engine.policy.update(proposal.depth, len(path))

    start = time.perf_counter()
    top_n = settings.top_n if engine.trace else 0
    tokens, numbers = verifier.events(proposal, p, judged, len(emitted), engine.text, top_n)
    events_ms = 1000 * (time.perf_counter() - start)

    engine.finish_reason = finish
    probes = engine.prober.after_round(engine) if engine.probing else None  # untimed
    watch = engine.greedy_watch  # a greedy half-precision session's, after the times
    greedy = settings.temperature == 0 and watch is not None
    greedy_diff = watch.check(emitted, generated, len(proposal.tokens) + 1) if greedy else None
    rnd = make_round(
        session_id=engine.header.session_id,
        index=engine.round_index,
        context_len=context_len,
        draft_ms=draft_ms,
        verify_ms=verify_ms,
        n_drafted=len(proposal.tokens),
        n_accepted=len(path),
        tokens=tokens,
        settings=settings,
        finish_reason=finish,
        extras={
            "k": policy_k,
            "stop": proposal.stop,
            "events_ms": events_ms,
            "probes": probes,
            "greedy_diff": greedy_diff,
            **proposal.extras,
            **numbers,
        },
    )
    engine.round_index += 1
    return rnd


def draft(engine, shape: TreeShape, policy_k: int, config: SamplingConfig) -> Proposal:
    """The drafter's proposal in `shape` (core.decoding.proposal: K levels, fewer near the
    length limits, and then its stop reason is "limit"); none when no room is left."""
    if shape.depth == 0:  # one token left: the target's own
        return Proposal.empty("limit", shape.rule(config))
    policy = engine.policy
    keep = policy.keep_drafting if policy.uses_confidence else None
    proposal = engine.drafter.draft(engine.ids, shape, config, engine.generator, keep)
    if shape.depth < policy_k and proposal.stop == "k":
        proposal = dataclasses.replace(proposal, stop="limit")
    return proposal
