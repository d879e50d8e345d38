"""A token tree in one target pass: every node scored with a 4-D attention mask (each node
sees the context and its own ancestors) and tree position ids (context length + depth), and
the cache cut down to the accepted path afterwards (the issue "Token trees"; the engine's
tree drafter and verifier are to come, behind core.decoding.verifier's seam).

transformers 5 takes a prepared 4-D mask as it is (masking_utils' _preprocess_mask_arguments),
additive: 0 where a query may look, the dtype's minimum where it may not.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache


def depths(parents: list[int]) -> list[int]:
    """Each node's depth (a root, parent -1, is at depth 0); parents come before children."""
    out: list[int] = []
    for i, parent in enumerate(parents):
        if not -1 <= parent < i:
            raise ValueError(f"node {i}: parent {parent} is not an earlier node (or -1)")
        out.append(0 if parent < 0 else out[parent] + 1)
    return out


def tree_mask(parents: list[int], past: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    """The additive mask [1, 1, n, past + n] of n tree nodes after `past` context positions."""
    n = len(parents)
    visible = torch.zeros((n, past + n), dtype=torch.bool, device=device)
    visible[:, :past] = True
    for i, parent in enumerate(parents):
        if parent >= 0:
            visible[i] = visible[parent]
        visible[i, past + i] = True
    mask = torch.zeros((n, past + n), dtype=dtype, device=device)
    return mask.masked_fill(~visible, torch.finfo(dtype).min)[None, None]


def score_tree(
    model: torch.nn.Module, tokens: list[int], parents: list[int], cache: DynamicCache, vocab: int
) -> torch.Tensor:
    """Logits [n, V] of every node (what follows it on its own path), in one forward pass
    after what the cache holds; the cache grows by n positions (all nodes, in order)."""
    depth = depths(parents)
    device = model.get_input_embeddings().weight.device
    past = cache.get_seq_length()
    dtype = next(model.parameters()).dtype
    input_ids = torch.tensor([tokens], dtype=torch.long, device=device)
    positions = torch.tensor([[past + d for d in depth]], dtype=torch.long, device=device)
    mask = tree_mask(parents, past, dtype, device)
    out = model(
        input_ids=input_ids, attention_mask=mask, position_ids=positions, cache=cache,
        use_cache=True,
    )  # fmt: skip
    return out.logits[0, :, :vocab]


def keep_path(cache: DynamicCache, past: int, path: list[int]) -> None:
    """Keep the context's `past` positions and the nodes of `path` (in order, as their
    positions after the pass), drop every other node: index_select per layer."""
    for layer in cache.layers:
        device = layer.keys.device
        index = torch.tensor([*range(past), *(past + i for i in path)], device=device)
        layer.keys = layer.keys.index_select(-2, index)
        layer.values = layer.values.index_select(-2, index)
