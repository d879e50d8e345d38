"""The Verifier seam: one verification rule, as the engine runs it.

A verifier scores a proposal (the target's one pass over the last emitted token and the
drafts), judges it (which drafts to keep, which token ends the round) and commits the
target's cache to what was kept. The engine calls the three in order on its own thread, for
the verifier its settings name (trace Settings.verifier). Today's rules are chains:
`token` (Leviathan et al., core.decoding.verify), `block` (Sun et al., core.decoding.block)
and the lossy `typical` (Medusa, core.decoding.typical); a token tree's verifier would score
with a 4-D mask and commit by gathering the accepted path's rows.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache

from specviz.core.decoding.block import block_as_verdict, verify_block
from specviz.core.decoding.forward import forward_states
from specviz.core.decoding.kv_cache import crop_to
from specviz.core.decoding.typical import TYPICAL_DELTA, TYPICAL_EPSILON, verify_typical
from specviz.core.decoding.verify import Verdict, verify
from specviz.core.decoding.warp import SamplingConfig, warp


class Verifier:
    """A chain verifier: one target pass over [last token, drafts], then a rule."""

    kind = "?"
    lossless = True  # the emitted tokens follow the target's p exactly

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
        Settings, for a rule with parameters of its own."""
        raise NotImplementedError

    def commit(self, cache: DynamicCache, length: int) -> None:
        """Keep the cache's first `length` positions: the context after the round."""
        crop_to(cache, length)


class TokenVerifier(Verifier):
    kind = "token"

    def judge(self, p, q, drafts, generator, settings=None):
        return verify(p, q, drafts, generator), {}


class BlockVerifier(Verifier):
    kind = "block"

    def judge(self, p, q, drafts, generator, settings=None):
        if drafts.shape[0] == 0:  # nothing drafted: the bonus token, as token-wise
            return verify(p, q, drafts, generator), {}
        block = verify_block(p, q, drafts, generator)
        numbers = {"weights": list(block.weights), "h": list(block.h), "u": list(block.u)}
        return block_as_verdict(block, p, q, drafts), {"block": numbers}


class TypicalVerifier(Verifier):
    kind = "typical"
    lossless = False

    def judge(self, p, q, drafts, generator, settings=None):
        epsilon = settings.typical_epsilon if settings is not None else TYPICAL_EPSILON
        delta = settings.typical_delta if settings is not None else TYPICAL_DELTA
        verdict, threshold = verify_typical(p, q, drafts, generator, epsilon, delta)
        return verdict, {"typical": {"threshold": threshold}}


VERIFIERS: dict[str, Verifier] = {
    v.kind: v for v in (TokenVerifier(), BlockVerifier(), TypicalVerifier())
}


def verifier_for(kind: str) -> Verifier:
    try:
        return VERIFIERS[kind]
    except KeyError:
        raise ValueError(f"unknown verifier {kind!r} (one of {', '.join(VERIFIERS)})") from None
