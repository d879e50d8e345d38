"""Early-exit self-speculation: the target's first L layers, its final norm and its LM head
draft; no second model and no extra weights (LayerSkip; transformers' assistant_early_exit).

The draft shares the target's cache: layer i < L of the draft IS layer i of the target, so
the target's cached keys and values of those layers, at verified positions, are exactly
what the draft would have computed. While drafting, the draft appends to those L layers
only; before verification they are cropped back, and the target's pass writes them again
for the verified tokens. Supported: decoder-only models whose base model keeps its layers in
`h` or `layers` and its final norm in `ln_f`, `norm` or `final_layernorm` (GPT-2, Llama,
Mistral, Qwen2, Phi, SmolLM2, ...).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from transformers import DynamicCache

from specviz.core.decoding.forward import max_positions, measure_ms_per_token
from specviz.core.decoding.kv_cache import crop_layers
from specviz.core.drafters.base import (
    Drafter,
    Proposal,
    draft_loop,
    fresh_q,
)
from specviz.core.trace.records import ModelInfo

LAYER_LISTS = ("h", "layers")
FINAL_NORMS = ("ln_f", "norm", "final_layernorm")


def decoder_layers(model: torch.nn.Module) -> tuple[torch.nn.Module, str]:
    """(base model, name of its layer list), or ValueError saying why early exit cannot
    run on this model."""
    name = type(model).__name__
    if getattr(model.config, "is_encoder_decoder", False):
        raise ValueError(f"early exit needs a decoder-only model; {name} is encoder-decoder")
    base = getattr(model, getattr(model, "base_model_prefix", ""), None)
    for attr in LAYER_LISTS:
        layers = getattr(base, attr, None) if base is not None else None
        if isinstance(layers, torch.nn.ModuleList) and len(layers) > 0:
            if not any(isinstance(getattr(base, n, None), torch.nn.Module) for n in FINAL_NORMS):
                break
            return base, attr
    raise ValueError(
        f"early exit is not supported for {name}: it needs a decoder-only model whose base "
        f"model holds its layers in one of {LAYER_LISTS} and a final norm in one of "
        f"{FINAL_NORMS} (GPT-2, Llama, Mistral, Qwen2, ...)"
    )


@contextmanager
def first_layers(model: torch.nn.Module, n: int) -> Iterator[torch.nn.Module]:
    """The model with only its first n layers (then its final norm and head), for the
    duration of the block; the full model is restored even if the block raises."""
    base, attr = decoder_layers(model)
    full = getattr(base, attr)
    setattr(base, attr, full[:n])  # a ModuleList of the same layer modules
    try:
        yield model
    finally:
        setattr(base, attr, full)


class EarlyExitDrafter(Drafter):
    """Drafts with the target's first `exit_layer` layers on the target's own cache."""

    kind = "early-exit"

    def __init__(
        self,
        target: torch.nn.Module,
        target_info: ModelInfo,
        exit_layer: int | None,
        vocab: int,
        eos: int | None,
    ):
        base, attr = decoder_layers(target)
        n_layers = len(getattr(base, attr))
        if n_layers < 2:
            raise ValueError("early exit needs a target with at least 2 layers")
        if exit_layer is None:
            exit_layer = n_layers // 2
        if not 1 <= exit_layer < n_layers:
            raise ValueError(
                f"the exit layer must be between 1 and {n_layers - 1} "
                f"(the target has {n_layers} layers), got {exit_layer}"
            )
        self.model, self.exit_layer, self.n_layers = target, exit_layer, n_layers
        self.vocab, self.eos = vocab, eos
        self.max_positions = max_positions(target)
        with first_layers(target, exit_layer) as draft:
            params = sum(p.numel() for p in draft.parameters())
        self.info = ModelInfo(
            name=f"{target_info.name} (first {exit_layer} of {n_layers} layers)",
            path=target_info.path,
            vocab_size=target_info.vocab_size,
            params=params,
            dtype=target_info.dtype,
            device=target_info.device,
        )
        self.cache: DynamicCache | None = None

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "exit_layer": self.exit_layer, "n_layers": self.n_layers}

    def prefill(self, ids: list[int], target_cache: DynamicCache) -> None:
        self.cache = target_cache  # shared: covers ids[:-1] in every layer

    def propose(self, ids, k, config, generator, keep_drafting) -> Proposal:
        cache = self.cache
        length = cache.get_seq_length()  # == len(ids) - 1: the target's verified prefix
        try:
            with first_layers(self.model, self.exit_layer) as draft:
                return draft_loop(
                    draft, cache, ids[length:], k, config, generator, keep_drafting,
                    self.vocab, self.eos,
                )  # fmt: skip
        finally:
            # The target's pass recomputes these positions in every layer.
            crop_layers(cache, self.exit_layer, length)

    def next_q(self, ids, config):
        with torch.inference_mode(), first_layers(self.model, self.exit_layer) as draft:
            return fresh_q(draft, ids, self.vocab, config)

    def measure_ms(self, ids: list[int], n_tokens: int) -> float:
        with first_layers(self.model, self.exit_layer) as draft:
            return measure_ms_per_token(draft, ids, n_tokens, self.vocab)


def build(params, pair) -> EarlyExitDrafter:
    return EarlyExitDrafter(
        pair.target, pair.target_info, params["exit_layer"], pair.vocab_size, pair.eos_token_id
    )
