"""The Verifier protocol: one verification rule, as the engine runs it, chain or tree.

A verifier takes a round's Proposal (core.decoding.proposal: a chain is a tree of width 1)
through four stages with the same signatures for every rule, so one rule can stand in for
another wherever it judges the proposal's shape:
- `score`: the target's one pass over the last emitted token and every node -> p [n + 1, V]
  (row 0 after the last token, row i + 1 after node i) and the hidden states a drafter asked
  for;
- `judge`: a Judgement: the accepted path (nodes, root to leaf), the token that ends the
  round and the rule's own numbers (Round extras: {"block": ...}, {"typical": ...});
- `commit`: the target's cache kept at the context, the last token and the path;
- `events`: the round's token records and the rule's Round extras ({"tree": ...}).
The engine (core.engine.round_step) calls them in order on its own thread, for the verifier
its settings name (trace Settings.verifier, looked up in core.trace.verifiers).

A chain rule (ChainVerifier: `token` here, `block` in core.decoding.block, the lossy
`typical` in core.decoding.typical) only says its verdict on p [K+1, V], q [K, V] and the
drafts (`verdict`); the tree rule (core.tree.verifier's `tree`) walks the parents. Adding a
rule: a module with its Verifier subclass and one VerifierSpec line in core.trace.verifiers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import torch
from transformers import DynamicCache

from specviz.core.decoding.forward import forward_states
from specviz.core.decoding.kv_cache import crop_to
from specviz.core.decoding.proposal import Proposal
from specviz.core.decoding.token_events import round_events
from specviz.core.decoding.verify import Verdict, verify
from specviz.core.decoding.warp import SamplingConfig, warp
from specviz.core.trace import verifiers
from specviz.core.trace.records import TokenEvent


@dataclass(frozen=True)
class Judgement:
    """What a rule decided about a proposal."""

    path: tuple[int, ...]  # the accepted nodes, root to leaf (a chain's: 0 .. n_accepted - 1)
    next_token: int  # the round's own token: resampled or bonus
    record: Any  # the rule's own account for its events: a chain's Verdict, a tree's TreeWalk
    numbers: dict[str, Any] = field(default_factory=dict)  # its Round extras, or {}


class Verifier:
    """The four stages of a rule; what it is (lossless, trees, options) is its spec."""

    kind = "?"  # its name in core.trace.verifiers

    @property
    def spec(self) -> verifiers.VerifierSpec:
        return verifiers.spec(self.kind)

    @property
    def lossless(self) -> bool:  # the emitted tokens follow the target's p exactly
        return self.spec.lossless

    def score(
        self,
        target: torch.nn.Module,
        last_token: int,
        proposal: Proposal,
        cache: DynamicCache,
        vocab: int,
        config: SamplingConfig,
        layers: tuple[int, ...] = (),
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(p [n + 1, V], states): the target's warped p after the last emitted token and
        after each node, and the hidden states of `layers` at those rows (None when no
        drafter asked); the cache grows by n + 1 positions."""
        raise NotImplementedError

    def judge(
        self, proposal: Proposal, p: torch.Tensor, generator: torch.Generator | None,
        settings=None,
    ) -> Judgement:  # fmt: skip
        """Which nodes to keep and the token that ends the round, from score's p (on the
        proposal's q, which the engine has put where p is). settings: the round's trace
        Settings, for a rule with options of its own (VerifierSpec.options)."""
        raise NotImplementedError

    def commit(self, cache: DynamicCache, past: int, path: tuple[int, ...], length: int) -> None:
        """Keep the target cache's `past` positions (the context before the pass), the last
        token and the accepted path, then at most `length` positions (the context after the
        round; an end-of-text token cuts the path short)."""
        raise NotImplementedError

    def events(
        self, proposal: Proposal, p: torch.Tensor, judged: Judgement, n_emit: int,
        text: Callable[[int], str], top_n: int,
    ) -> tuple[tuple[TokenEvent, ...], dict[str, Any]]:  # fmt: skip
        """(the round's token records, the rule's Round extras): n_emit of the path and the
        round's own token were emitted (fewer after an end-of-text token)."""
        raise NotImplementedError


class ChainVerifier(Verifier):
    """A chain rule: one target pass over [last token, drafts], the rule's verdict on p, q
    [K, V] and the drafts, the cache cropped to what was kept."""

    def score(self, target, last_token, proposal, cache, vocab, config, layers=()):
        """p [K+1, V]: the target's warped distributions at each draft and one more."""
        self._check(proposal)
        drafted = proposal.tokens
        logits, states = forward_states(
            target, [last_token, *drafted], cache, vocab, len(drafted) + 1, layers
        )
        return warp(logits, config), states

    def judge(self, proposal, p, generator, settings=None):
        self._check(proposal)
        q = proposal.q_rows(p.shape[-1], p.device)  # [K, V]
        drafts = torch.tensor(proposal.tokens, dtype=torch.long, device=p.device)  # [K]
        verdict, numbers = self.verdict(p, q, drafts, generator, settings)
        return Judgement(tuple(range(verdict.n_accepted)), verdict.next_token, verdict, numbers)

    def verdict(
        self, p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, generator, settings=None
    ) -> tuple[Verdict, dict[str, Any]]:
        """(the verdict in the round records' vocabulary, the rule's own numbers as Round
        extras: {"block": ...}, {"typical": ...} or {}) for p [K+1, V], q [K, V], drafts [K]."""
        raise NotImplementedError

    def commit(self, cache, past, path, length):
        """A chain's path is a prefix of the drafts: keep the cache's first `length`."""
        crop_to(cache, length)

    def events(self, proposal, p, judged, n_emit, text, top_n):
        q = proposal.q_rows(p.shape[-1], p.device)  # [K, V]
        tokens = round_events(p, q, proposal.tokens, judged.record, n_emit, text, top_n)
        return tokens, judged.numbers

    def _check(self, proposal: Proposal) -> None:
        if not proposal.is_chain:
            raise ValueError(f"the {self.kind} rule judges chains; a token tree needs a tree rule")


class TokenVerifier(ChainVerifier):
    kind = "token"

    def verdict(self, p, q, drafts, generator, settings=None):
        return verify(p, q, drafts, generator), {}


def verifier_for(kind: str) -> Verifier:
    """The Verifier of a registered rule (one per rule, built on first use); ValueError
    naming the known ones."""
    return _built(verifiers.spec(kind))


@cache
def _built(spec: verifiers.VerifierSpec) -> Verifier:
    return spec.build()
