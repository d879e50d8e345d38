"""The Verifier protocol: one verification rule, as the engine runs it.

A verifier scores a proposal (the target's one pass over the last emitted token and the
drafts), judges it (which drafts to keep, which token ends the round) and commits the
target's cache to what was kept. The engine calls the three in order on its own thread, for
the verifier its settings name (trace Settings.verifier, looked up in core.trace.verifiers).
A chain rule's stages take the drafts (ChainVerifier: `token` here, `block` in
core.decoding.block, the lossy `typical` in core.decoding.typical); a tree rule's also take
the nodes' parents (core.tree.verifier's `tree`: 4-D mask, gather the accepted path).

Adding a rule: a module with its Verifier subclass and one VerifierSpec line in
core.trace.verifiers.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch
from transformers import DynamicCache

from specviz.core.decoding.forward import forward_states
from specviz.core.decoding.kv_cache import crop_to
from specviz.core.decoding.verify import Verdict, verify
from specviz.core.decoding.warp import SamplingConfig, warp
from specviz.core.trace import verifiers


class Verifier:
    """The three stages of a rule; what it is (lossless, trees, options) is its spec."""

    kind = "?"  # its name in core.trace.verifiers

    @property
    def spec(self) -> verifiers.VerifierSpec:
        return verifiers.spec(self.kind)

    @property
    def lossless(self) -> bool:  # the emitted tokens follow the target's p exactly
        return self.spec.lossless

    def score(self, target: torch.nn.Module, *proposal, **options):
        """One target pass over the last emitted token and the proposal: (p, states)."""
        raise NotImplementedError

    def judge(self, *scored, **options):
        """Which drafts to keep and the token that ends the round, from score's p."""
        raise NotImplementedError

    def commit(self, cache: DynamicCache, *kept) -> None:
        """Keep the target's cache at what the round kept."""
        raise NotImplementedError


class ChainVerifier(Verifier):
    """A chain rule: one target pass over [last token, drafts], then the rule's judge."""

    def score(
        self,
        target: torch.nn.Module,
        last_token: int,
        drafted: list[int],
        cache: DynamicCache,
        vocab: int,
        config: SamplingConfig,
        layers: tuple[int, ...] = (),
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(p [K+1, V], states): the target's warped distributions at each draft and one
        more, and the hidden states of `layers` at those K + 1 positions ([K+1, n x H], None
        when no drafter asked); the cache grows by K + 1 positions."""
        logits, states = forward_states(
            target, [last_token, *drafted], cache, vocab, len(drafted) + 1, layers
        )
        return warp(logits, config), states

    def judge(
        self, p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, generator, settings=None
    ) -> tuple[Verdict, dict[str, Any]]:
        """(the verdict in the round records' vocabulary, the rule's own numbers as Round
        fields: {"block": ...}, {"typical": ...} or {}). settings: the round's trace
        Settings, for a rule with options of its own (VerifierSpec.options)."""
        raise NotImplementedError

    def commit(self, cache: DynamicCache, length: int) -> None:
        """Keep the cache's first `length` positions: the context after the round."""
        crop_to(cache, length)


class TokenVerifier(ChainVerifier):
    kind = "token"

    def judge(self, p, q, drafts, generator, settings=None):
        return verify(p, q, drafts, generator), {}


def verifier_for(kind: str) -> Verifier:
    """The Verifier of a registered rule (one per rule, built on first use); ValueError
    naming the known ones."""
    return _built(verifiers.spec(kind))


@cache
def _built(spec: verifiers.VerifierSpec) -> Verifier:
    return spec.build()
