"""One round, whatever its proposal's shape: draft -> one target pass -> verify -> Round.

A chain is a token tree of width 1: every proposal carries parent links (a chain's
Proposal.parents, each node the child of the one before) and a verdict is the accepted path
through it plus the round's own token. `run_round` is the round's one skeleton and the
engine's one place a Round is made (records.make_round, which the trace reader shares); a
shape says how its proposal is drafted, judged in the target's one pass, committed to the
caches and recorded: ChainStep here (the settings' chain verifier,
core.decoding.verifier), TreeStep in core.engine.tree_rounds (the multi-draft rule).

Cache invariant between rounds (core.engine.speculative): `ids` holds prompt + emitted
tokens; the target's cache covers ids[:-1]; a drafter's, if it has one, a prefix of that.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import torch

from specviz.core.decoding.token_events import round_events
from specviz.core.decoding.verifier import verifier_for
from specviz.core.decoding.warp import SamplingConfig
from specviz.core.drafters.base import Proposal
from specviz.core.trace.records import Round, TokenEvent, make_round


@dataclass(frozen=True)
class Verified:
    """What the target's one pass over a proposal and the rule decided."""

    p: torch.Tensor  # [n + 1, V] the target's warped rows: after the last token, then per node
    q: Any  # the draft's q on the target's device: a chain's [n, V], a tree's {node: [V]}
    states: torch.Tensor | None  # the hidden states the drafter asked for, per row of p
    path: tuple[int, ...]  # the accepted nodes, root to leaf (a chain's: 0 .. n_accepted - 1)
    next_token: int  # the round's own token: resampled or bonus
    judgement: Any  # the rule's own record: a chain's Verdict, a tree's TreeWalk
    numbers: dict[str, Any]  # the rule's Round fields ({"block": ...}, {"typical": ...}) or {}
    past: int  # the target cache's length before the pass


def run_round(engine, shape, config: SamplingConfig) -> Round:
    """One round of `engine` (a SpeculativeEngine past prefill) in `shape` (ChainStep or
    TreeStep): draft and verify timed apart (the appending and the cache commits count as
    verification), then the token records, timed apart (events_ms); after the times, the
    cost probes and, in a greedy half-precision session, where the text first leaves the
    target alone's greedy decoding (greedy_diff)."""
    settings = engine.settings
    context_len = len(engine.ids)
    generated = engine.n_generated  # before the round: where its tokens start
    policy_k = engine.policy.next_k()

    clock = engine.clock()
    clock.mark()
    proposal, stop = shape.draft(engine, policy_k, config)
    clock.mark()
    verified = shape.verify(engine, proposal, config)
    accepted = [proposal.tokens[node] for node in verified.path]
    emitted, finish = engine.emit([*accepted, verified.next_token])
    shape.commit(engine, proposal, verified, len(emitted))
    clock.mark()
    draft_ms, verify_ms = clock.spans()
    engine.policy.update(proposal.depth, len(verified.path))

    start = time.perf_counter()
    top_n = settings.top_n if engine.trace else 0
    tokens, fields = shape.records(engine, proposal, verified, len(emitted), top_n)
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
        n_accepted=len(verified.path),
        tokens=tokens,
        settings=settings,
        finish_reason=finish,
        extras={
            "k": policy_k,
            "stop": stop,
            "events_ms": events_ms,
            "matched": proposal.matched,
            "probes": probes,
            "greedy_diff": greedy_diff,
            **fields,
        },
    )
    engine.round_index += 1
    return rnd


class ChainStep:
    """A chain's round: the drafter's up to K tokens, the settings' verifier (token, block,
    typical) over [last token, drafts] in one pass, the caches cropped to what was kept."""

    def draft(self, engine, policy_k: int, config: SamplingConfig) -> tuple[Proposal, str]:
        """(the proposal of up to K tokens, why drafting stopped): fewer near the length
        limits, and then the stop reason is "limit"."""
        k = engine.room(policy_k)
        if k == 0:  # one token left: the target's own
            empty = torch.zeros((0, engine.pair.vocab_size), device=engine.pair.device)
            return Proposal([], empty, "limit"), "limit"
        policy = engine.policy
        keep = policy.keep_drafting if policy.uses_confidence else None
        proposal = engine.drafter.propose(engine.ids, k, config, engine.generator, keep)
        if k < policy_k and proposal.stop == "k":
            proposal = dataclasses.replace(proposal, stop="limit")
        return proposal, proposal.stop

    def verify(self, engine, proposal: Proposal, config: SamplingConfig) -> Verified:
        """The settings' verifier scores the last emitted token and every draft in one
        target pass (p [k+1, V] and the states the drafter asked for) and judges them."""
        pair, drafted = engine.pair, proposal.tokens
        q = proposal.q.to(pair.device)  # [K, V]; a draft may live apart
        verifier = verifier_for(engine.settings.verifier)
        past = engine.t_cache.get_seq_length()
        layers = engine.drafter.target_layers
        p, states = verifier.score(pair.target, engine.ids[-1], drafted, engine.t_cache,
                                   pair.vocab_size, config, layers)  # fmt: skip
        draft_tokens = torch.tensor(drafted, dtype=torch.long, device=pair.device)  # [K]
        verdict, numbers = verifier.judge(p, q, draft_tokens, engine.generator, engine.settings)
        path = tuple(range(verdict.n_accepted))
        return Verified(p, q, states, path, verdict.next_token, verdict, numbers, past)

    def commit(self, engine, proposal: Proposal, verified: Verified, n_emitted: int) -> None:
        """The target keeps ids[:-1] of the new sequence, the drafter at most that; the
        drafter gets the target's states of the last token and the drafts kept."""
        verifier_for(engine.settings.verifier).commit(engine.t_cache, len(engine.ids) - 1)
        engine.drafter.observe(len(verified.path), len(proposal.tokens))
        engine.drafter.rollback(len(engine.ids) - 1)
        if verified.states is not None:  # one row per emitted token
            engine.drafter.accept_states(verified.states[:n_emitted])

    def records(self, engine, proposal: Proposal, verified: Verified, n_emit: int,
                top_n: int) -> tuple[tuple[TokenEvent, ...], dict[str, Any]]:  # fmt: skip
        """(the round's tokens, its shape's own Round fields)."""
        tokens = round_events(verified.p, verified.q, proposal.tokens, verified.judgement,
                              n_emit, engine.text, top_n)  # fmt: skip
        fields = {"copied_from": proposal.copied_from, "draft_pieces": proposal.pieces}
        return tokens, {**fields, **verified.numbers}


CHAIN = ChainStep()
