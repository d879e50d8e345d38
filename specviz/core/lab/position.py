"""A real position's distributions for the lab: the pair's warped and raw p and q at one
context."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from specviz.core.decoding.warp import SamplingConfig, warp
from specviz.core.lab.distributions import BarLayout
from specviz.core.metrics.position_bars import REST_LABEL  # the last bar: the rest


@dataclass(frozen=True)
class PositionDistributions:
    """p and q at one position of a real pair, over the full vocabulary. Arrays are [V]."""

    context_len: int  # tokens read before the position
    settings: SamplingConfig  # how p and q were warped from the logits
    p_raw: np.ndarray  # softmax(target logits): temperature 1, no top-k / top-p
    q_raw: np.ndarray  # softmax(draft logits)
    p: np.ndarray  # warped: what the rule must use, the distribution tokens are drawn from
    q: np.ndarray
    top_n: int  # how many bars a panel shows before "everything else"
    # Tokens with a text: at least the top_n of max(p, q), of max(p_raw, q_raw) and of all
    # four, ordered by their largest probability under any of the four.
    top_ids: tuple[int, ...]
    top_text: tuple[str, ...]

    @property
    def alpha(self) -> float:
        """sum min(p, q) of the warped distributions: what the rule accepts at."""
        return float(np.minimum(self.p, self.q).sum())

    @property
    def alpha_raw(self) -> float:
        """sum min(p_raw, q_raw): for contrast only; no token is drawn from these."""
        return float(np.minimum(self.p_raw, self.q_raw).sum())

    def layout(self) -> BarLayout:
        """The warped-vs-raw bars: the top_n tokens under any of the four, then the rest."""
        n = self.top_n
        return BarLayout(np.array(self.top_ids[:n]), (*self.top_text[:n], REST_LABEL), True)

    def label(self, token_id: int) -> str:
        """The text of a token in top_ids, else its id."""
        try:
            return self.top_text[self.top_ids.index(token_id)]
        except ValueError:
            return f"#{token_id}"


def position_distributions(
    pair, context_ids: Sequence[int], settings, top_n: int = 20, drafter=None
):
    """One fresh forward of the target on context_ids, and the drafter's q there (its
    core.drafters Drafter.next_q: the session's own drafter, so that an early-exit or lookup
    session shows the q its rounds drew from; default: the pair's draft model); the
    next-token p and q, raw and warped with `settings` (a trace Settings or a
    SamplingConfig). Runs on the caller's thread (the main window's worker)."""
    from transformers import DynamicCache

    from specviz.core.decoding.forward import forward, max_positions
    from specviz.core.drafters.registry import DrafterConfig, make_drafter

    if drafter is None:
        if pair.draft is None:
            raise ValueError("the lab compares a draft model's q with p: load a pair with a draft")
        drafter = make_drafter(DrafterConfig(), pair)
    ids = [int(i) for i in context_ids]
    if not ids:
        raise ValueError("the context is empty: the models need at least one token to read")
    for limit in (max_positions(pair.target), drafter.max_positions):
        if limit is not None and len(ids) > limit:
            raise ValueError(f"the context is {len(ids)} tokens; these models read at most {limit}")
    config = SamplingConfig(settings.temperature, settings.top_k, settings.top_p)
    config.validate()
    with torch.inference_mode():
        logits = forward(pair.target, ids, DynamicCache(), pair.vocab_size, keep=1)[0].float()
        drafted = drafter.next_q(ids, config)
    if drafted is None:
        raise ValueError(f"the {drafter.kind} drafter proposes nothing after this context")
    raw = [torch.softmax(logits, dim=-1).double(), drafted[0].cpu()]  # [V] each
    warped = [warp(logits, config).double(), drafted[1].cpu()]  # [V] each
    arrays = [t.cpu().numpy() for t in (*raw, *warped)]
    # Texts for every token a bar may show: the top-n of max(p, q) (the lab's bars), of
    # max(p_raw, q_raw), and of all four (the warped-vs-raw bars), likeliest first.
    peak = np.maximum.reduce(arrays)
    wanted = set()
    for order_by in (np.maximum(arrays[2], arrays[3]), np.maximum(arrays[0], arrays[1]), peak):
        wanted.update(int(i) for i in np.argsort(-order_by, kind="stable")[:top_n])
    top_ids = tuple(sorted(wanted, key=lambda i: (-peak[i], i)))
    return PositionDistributions(
        context_len=len(ids),
        settings=config,
        p_raw=arrays[0],
        q_raw=arrays[1],
        p=arrays[2],
        q=arrays[3],
        top_n=top_n,
        top_ids=top_ids,
        top_text=tuple(pair.token_text(i) for i in top_ids),
    )
