"""The tree verifier, core.trace.verifiers' "tree": a token tree's Verifier (the protocol is
core.decoding.verifier's), SpecInfer's multi-draft rule or the EAGLE walk.

It scores the last emitted token and every drafted node in one target pass (a 4-D mask:
each node sees the context and its ancestors, core.tree.attention), judges the tree with the
exact multi-draft rule (core.tree.walk) and commits the target's cache to the
accepted path (index_select per layer), as a chain verifier crops it to the kept prefix.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from specviz.core.decoding.verifier import Verifier
from specviz.core.decoding.warp import SamplingConfig, warp
from specviz.core.tree.attention import keep_path, score_tree
from specviz.core.tree.walk import TreeWalk, walk_tree


class TreeVerifier(Verifier):
    kind = "tree"

    def score(
        self,
        target: torch.nn.Module,
        last_token: int,
        tokens: list[int],
        parents: list[int],
        cache: DynamicCache,
        vocab: int,
        config: SamplingConfig,
        layers: tuple[int, ...] = (),
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(p [n + 1, V], states): row 0 the target's warped p after the last emitted token,
        row i + 1 its p after node i, and the same rows of the hidden states of `layers`
        (None when no drafter asked); the cache grows by n + 1 positions."""
        shifted = [-1, *(parent + 1 for parent in parents)]  # the last token is the root
        if not layers:
            return warp(score_tree(target, [last_token, *tokens], shifted, cache, vocab),
                        config), None  # fmt: skip
        logits, states = score_tree(target, [last_token, *tokens], shifted, cache, vocab, layers)
        return warp(logits, config), states

    def judge(self, tokens, parents, p_rows, q_at, rule, generator) -> TreeWalk:
        """Walk the tree (core.tree.walk): rule "sample" (SpecInfer) or "topk" (EAGLE)."""
        return walk_tree(tokens, parents, p_rows, q_at, rule, generator)

    def commit(self, cache: DynamicCache, past: int, path: tuple[int, ...], length: int) -> None:
        """Keep the context's `past` positions, the last token and the accepted nodes, then
        at most `length` positions (after an end-of-text token the path is cut short)."""
        keep_path(cache, past, [0, *(node + 1 for node in path)][: max(length - past, 0)])
