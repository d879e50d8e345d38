"""A token tree in one target pass: every node scored with a 4-D attention mask (each node
sees the context and its own ancestors) and tree position ids (context length + depth), and
the cache cut down to the accepted path afterwards. The engine's tree drafter
(core.drafters.tree_draft) and verifier (core.tree.verifier) are built on it.

transformers 5 takes a prepared 4-D mask as it is (masking_utils' _preprocess_mask_arguments),
additive: 0 where a query may look, the dtype's minimum where it may not.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from specviz.core.decoding.forward import layer_states
from specviz.core.trace.tree_nodes import node_depths


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
    model: torch.nn.Module,
    tokens: list[int],
    parents: list[int],
    cache: DynamicCache,
    vocab: int,
    layers: tuple[int, ...] = (),
):
    """Logits [n, V] of every node (what follows it on its own path), in one forward pass
    after what the cache holds; the cache grows by n positions (all nodes, in order). With
    `layers`: (logits, states [n, len(layers) x H]), the inputs of those layers per node."""
    return tree_forward(model, tokens, parents, list(range(len(tokens))), {}, cache, vocab,
                        layers=layers)  # fmt: skip


def tree_forward(
    model: torch.nn.Module,
    tokens: list[int],
    parents: list[int],
    new: list[int],
    slots: dict[int, int],
    cache: DynamicCache,
    vocab: int,
    context: int | None = None,
    layers: tuple[int, ...] = (),
):
    """Logits [len(new), V] of the nodes `new` (indexes into tokens / parents), fed in one
    pass after what the cache holds: the context's first `context` positions (default: all
    of it) and the nodes in `slots` ({node: its cache position}, fed by earlier calls). Each
    node sees the context, its ancestors (in slots, or earlier in `new`) and itself, at
    position context + depth - 1 (a child of the context: depth 1); `slots` gains the new
    nodes' positions (the tree drafter grows a tree a level at a time this way). With
    `layers`: (logits, states), as score_tree."""
    depth = node_depths(parents)
    device = model.get_input_embeddings().weight.device
    start = cache.get_seq_length()
    context = start if context is None else context
    visible = visibility(parents, new, slots, start, context)
    dtype = next(model.parameters()).dtype
    mask = additive(visible, dtype).to(device)
    input_ids = torch.tensor([[tokens[i] for i in new]], dtype=torch.long, device=device)
    positions = torch.tensor([[context + depth[i] - 1 for i in new]], dtype=torch.long,
                             device=device)  # fmt: skip
    out = model(
        input_ids=input_ids, attention_mask=mask, position_ids=positions, cache=cache,
        use_cache=True, **({"output_hidden_states": True} if layers else {}),
    )  # fmt: skip
    if layers:
        return out.logits[0, :, :vocab], layer_states(out, layers)
    return out.logits[0, :, :vocab]


def visibility(parents: list[int], new: list[int], slots: dict[int, int], start: int,
               context: int) -> torch.Tensor:  # fmt: skip
    """[len(new), start + len(new)] bool: what each new node may look at (the context's first
    `context` positions, its ancestors where `slots` put them, itself); `slots` gains the
    new nodes' positions start, start + 1, ..."""
    visible = torch.zeros((len(new), start + len(new)), dtype=torch.bool)
    visible[:, :context] = True
    for row, node in enumerate(new):
        slots[node] = start + row
        ancestor = node
        while ancestor >= 0:
            visible[row, slots[ancestor]] = True  # KeyError: an ancestor never fed
            ancestor = parents[ancestor]
    return visible


def additive(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[1, 1, n, S]: 0 where visible, the dtype's minimum elsewhere."""
    mask = torch.zeros(visible.shape, dtype=dtype)
    return mask.masked_fill(~visible, torch.finfo(dtype).min)[None, None]


def keep_positions(cache: DynamicCache, keep: list[int]) -> None:
    """Keep the cache positions `keep` (in this order), drop the rest: index_select per
    layer (what follows a tree's pass: the context and the accepted path)."""
    for layer in cache.layers:
        index = torch.tensor(keep, device=layer.keys.device)
        layer.keys = layer.keys.index_select(-2, index)
        layer.values = layer.values.index_select(-2, index)


def keep_path(cache: DynamicCache, past: int, path: list[int]) -> None:
    """Keep the context's `past` positions and the nodes of `path` (in order, as their
    positions after the pass), drop every other node: index_select per layer."""
    keep_positions(cache, [*range(past), *(past + i for i in path)])
