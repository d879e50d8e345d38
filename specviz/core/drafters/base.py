"""The drafter seam: what a drafter is (Drafter); what it proposes (Proposal) and the shape
it is asked for (TreeShape) are core.decoding.proposal's; what the registry knows of one
(DrafterSpec, DrafterParam) is in core.drafters.spec, without torch.

A drafter proposes up to k tokens after the context, with q [k, V]: the distribution each
token was drawn from (one-hot for a deterministic drafter); one whose spec says drafts_trees
also proposes token trees (propose_tree). Every rule judges a Proposal the same way whatever
drafted it, so the output follows the target's p for every drafter.

A drafter is one module here (draft_model.py, prompt_lookup.py, early_exit.py), which
defines its Drafter and its build(params, pair), and one spec in registry.py; the command
line's flags, the window's Drafting box, the wire format and every "does it need a draft
model" question derive from the spec.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from transformers import DynamicCache

from specviz.core.decoding.forward import forward
from specviz.core.decoding.proposal import Proposal, TreeShape
from specviz.core.decoding.warp import SamplingConfig, sample, warp
from specviz.core.trace.records import ModelInfo

# Called after each drafted token with the draft's probability of it: draft another?
KeepDrafting = Callable[[float], bool]
DRAFTER_CONTEXT = 128  # context tokens a drafter without a cache of its own is timed on


class Drafter:
    """The interface, called on the engine's thread only: prefill once per session, then per
    round draft (propose, or propose_tree for a tree), observe and keep; between rounds the
    cost probes call step_ms. The target's cache is handed to prefill, and a drafter may
    share it (early exit)."""

    kind = "?"
    info: ModelInfo  # the trace header's "draft": what drafted
    max_positions: int | None = None  # the longest context the drafter can read
    # The target layers whose hidden states (their inputs) the drafter reads (EAGLE-3's aux
    # layers); the target's passes return them only when asked: () costs nothing.
    target_layers: tuple[int, ...] = ()
    # What a user should know before the first round (a head that fits other layers): the
    # trace header keeps them (`drafter_notes`), the command line and the window say them.
    notes: tuple[str, ...] = ()

    def describe(self) -> dict[str, Any]:
        """The trace header's `drafter` field: the kind and the parameters in use."""
        return {"kind": self.kind}

    def prefill(self, ids: list[int], target_cache: DynamicCache) -> None:
        """A new session on ids; the target's cache already covers ids[:-1]."""

    def draft(
        self,
        ids: list[int],
        shape: TreeShape,
        config: SamplingConfig,
        generator: torch.Generator,
        keep_drafting: KeepDrafting | None,
    ) -> Proposal:
        """The round's proposal in `shape` (depth >= 1): a chain of up to shape.depth tokens
        (width 1: propose, keep_drafting the confidence policy's question) or a token tree
        (propose_tree)."""
        if shape.chain:
            return self.propose(ids, shape.depth, config, generator, keep_drafting)
        return self.propose_tree(ids, shape, config, generator)

    def propose(
        self,
        ids: list[int],
        k: int,
        config: SamplingConfig,
        generator: torch.Generator,
        keep_drafting: KeepDrafting | None,
    ) -> Proposal:
        """Up to k tokens after ids (Proposal.chain), each drawn from its q."""
        raise NotImplementedError

    def propose_tree(
        self, ids: list[int], shape: TreeShape, config: SamplingConfig, generator: torch.Generator
    ) -> Proposal:
        """A token tree after ids, `shape.depth` levels, at most shape.width children a node
        and shape.budget nodes: only a drafter whose spec says drafts_trees has one."""
        raise NotImplementedError(f"the {self.kind} drafter drafts chains only")

    def next_q(self, ids: list[int], config: SamplingConfig) -> tuple[torch.Tensor, ...] | None:
        """(q_raw, q) [V] each, float64: what this drafter would draw its first token after
        ids from, raw and warped, from a fresh pass (its state untouched); None when it
        would propose nothing there (a lookup without a match). For the lab's position."""
        raise NotImplementedError

    def finish(self, ids: list[int]) -> None:
        """The session has ended (its last round was emitted): ids are its prompt and
        output. A drafter that learns across requests (suffix decoding) keeps the output."""

    def observe(self, n_accepted: int, n_drafted: int) -> None:
        """After verification: how many of the proposed tokens the target kept (a drafter
        that adapts, as transformers' update_candidate_strategy, learns from it)."""

    def rollback(self, length: int) -> None:
        """Only ids[:length] are valid context from now on."""

    def keep(self, path: tuple[int, ...], length: int) -> None:
        """After verification: the proposal's nodes `path` (root to leaf) were accepted and
        only ids[:length] are valid context from now on. A chain's path is a prefix of what
        was drafted: rollback(length); a tree drafter also drops the other branches."""
        self.rollback(length)

    def accept_states(self, states: torch.Tensor) -> None:
        """The target's hidden states of `target_layers` ([n, len x H]) at the next n
        positions its cache now holds: the prompt's (before prefill), then after each round
        (after rollback) those of the last token and the drafts it kept."""

    def measure_ms(self, ids: list[int], n_tokens: int) -> float:
        """Median time of one drafting step after ids (the c of the predicted speedup)."""
        raise NotImplementedError

    def step_ms(
        self, ids: list[int], config: SamplingConfig, generator: torch.Generator, device
    ) -> float:
        """One drafting step's time at the session's context, for the cost probes; the
        drafter's state is left as found. By default: measure_ms on the context's tail."""
        return self.measure_ms(ids[-DRAFTER_CONTEXT:], 1)


def one_hot(tokens: list[int], vocab: int, device) -> torch.Tensor:
    """[len(tokens), V] one-hot rows: the q of a deterministic drafter's proposal."""
    q = torch.zeros((len(tokens), vocab), device=device)
    q[torch.arange(len(tokens)), torch.tensor(tokens, dtype=torch.long)] = 1.0
    return q


def one_hot_next(token: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(q_raw, q) [V] float64, one-hot at token (raw and warped alike: nothing is drawn):
    a deterministic drafter's next_q."""
    q = torch.zeros(vocab, dtype=torch.float64)
    q[token] = 1.0
    return q, q.clone()


def ms_per_call(call: Callable[[], object], n: int) -> float:
    """Mean milliseconds of n calls (a model-free drafter's measure_ms)."""
    start = time.perf_counter()
    for _ in range(n):
        call()
    return 1000 * (time.perf_counter() - start) / max(n, 1)


def fresh_q(model: torch.nn.Module, ids: list[int], vocab: int, config: SamplingConfig):
    """(q_raw, q) [V] float64 from one fresh forward of a model over ids."""
    logits = forward(model, ids, DynamicCache(), vocab, keep=1)[0].float()  # [V]
    return torch.softmax(logits, dim=-1).double(), warp(logits, config).double()


def draft_loop(
    model: torch.nn.Module,
    cache: DynamicCache,
    feed: list[int],
    k: int,
    config: SamplingConfig,
    generator: torch.Generator,
    keep_drafting: KeepDrafting | None,
    vocab: int,
    eos: int | None,
) -> Proposal:
    """Up to k tokens from a model, one forward each, each sampled from the warped q it is
    judged by. feed: the tokens the cache lacks (>= 1). The stop reason is "k", "eos" or
    "threshold" (the draft's probability of its token, at temperature 1 when greedy)."""
    tokens: list[int] = []
    q_rows: list[torch.Tensor] = []
    stop = "k"
    for _ in range(k):
        logits = forward(model, feed, cache, vocab, keep=1)[0]  # [V]
        q_i = warp(logits, config)  # [V]
        token = sample(q_i, generator)
        q_rows.append(q_i)
        tokens.append(token)
        feed = [token]
        if token == eos:
            stop = "eos"  # nothing after an end-of-text token can be emitted
            break
        if keep_drafting is not None and len(tokens) < k:
            confidence = torch.softmax(logits.float(), -1)[token] if config.greedy else q_i[token]
            if not keep_drafting(float(confidence)):
                stop = "threshold"
                break
    return Proposal.chain(tokens, q_rows, stop)


def cache_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device
