"""One cached forward pass, and plain autoregressive decoding on the same machinery.

Target-only decoding is the baseline every speedup is measured against, so it uses the
same cache, the same forward call and the same warping as the speculative engine.
"""

from __future__ import annotations

import statistics
import time

import torch
from transformers import DynamicCache

from specviz.core.decoding.warp import SamplingConfig, sample, warp


def forward(
    model: torch.nn.Module, tokens: list[int], cache: DynamicCache, vocab: int, keep: int
) -> torch.Tensor:
    """Feed tokens after what the cache holds; logits of the last `keep` positions.

    Returns float logits [keep, vocab]; the cache grows by len(tokens).
    """
    return forward_states(model, tokens, cache, vocab, keep, ())[0]


def forward_states(
    model: torch.nn.Module,
    tokens: list[int],
    cache: DynamicCache,
    vocab: int,
    keep: int,
    layers: tuple[int, ...],
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """forward(), and the hidden states a drafter asked for: (logits [keep, V], states
    [len(tokens), len(layers) x H] or None when layers is empty). A layer i's state is its
    input (transformers' hidden_states[i], what vLLM's EAGLE-3 hooks read)."""
    device = model.get_input_embeddings().weight.device  # where the ids go in (device_map)
    input_ids = torch.tensor([tokens], dtype=torch.long, device=device)  # [1, T]
    # No padding, ever; an explicit all-ones mask says so (and keeps transformers from
    # warning when a token equals the pad id).
    mask = torch.ones((1, cache.get_seq_length() + len(tokens)), dtype=torch.long, device=device)
    out = model(
        input_ids=input_ids, attention_mask=mask, cache=cache, use_cache=True,
        logits_to_keep=keep, **({"output_hidden_states": True} if layers else {}),
    )  # fmt: skip
    return out.logits[0, -keep:, :vocab], layer_states(out, layers)  # [keep, V]


def layer_states(out, layers: tuple[int, ...]) -> torch.Tensor | None:
    """[T, len(layers) x H]: the inputs of `layers` from a forward's output (batch 1)."""
    if not layers:
        return None
    return torch.cat([out.hidden_states[i][0] for i in layers], -1)


def max_positions(model: torch.nn.Module) -> int | None:
    """The longest context a model reads (its position embeddings), or None if unbounded."""
    config = model.config
    for name in ("n_positions", "max_position_embeddings"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


@torch.inference_mode()
def decode(
    model: torch.nn.Module,
    prompt_ids: list[int],
    max_new_tokens: int,
    vocab: int,
    config: SamplingConfig,
    generator: torch.Generator | None = None,
    eos_token_id: int | None = None,
) -> list[int]:
    """Target-only autoregressive decoding with a KV cache: one forward per token."""
    if max_new_tokens < 1:
        return []
    cache = DynamicCache()
    token = pick(forward(model, prompt_ids, cache, vocab, keep=1)[0], config, generator)
    out = [token]
    while token != eos_token_id and len(out) < max_new_tokens:
        token = step(model, token, cache, vocab, config, generator)
        out.append(token)
    return out


def pick(logits: torch.Tensor, config: SamplingConfig, generator: torch.Generator | None) -> int:
    """The next token from one row of logits [V]: warp, then argmax (greedy) or a draw."""
    probs = warp(logits, config)
    return int(probs.argmax()) if config.greedy else sample(probs, generator)


def step(
    model: torch.nn.Module,
    token: int,
    cache: DynamicCache,
    vocab: int,
    config: SamplingConfig,
    generator: torch.Generator | None,
) -> int:
    """One step of target-only decoding: feed `token` after the cache, pick the next one.

    What decode() repeats per token, and what the cost model's T_t(1) probe times
    (core/engine/cost_probes.py), so that the baseline is this loop's cost and nothing else.
    """
    return pick(forward(model, [token], cache, vocab, keep=1)[0], config, generator)


@torch.inference_mode()
def measure_ms_per_token(
    model: torch.nn.Module, prompt_ids: list[int], n_tokens: int, vocab: int, warmup: int = 2
) -> float:
    """Median wall time of one cached decoding step (forward + greedy pick) after the prompt.

    Greedy, so it draws no random numbers and leaves every sampling stream untouched.
    """
    cache = DynamicCache()
    if len(prompt_ids) > 1:
        forward(model, prompt_ids[:-1], cache, vocab, keep=1)
    token = prompt_ids[-1]
    sync = next(model.parameters()).device.type == "cuda"
    times = []
    for i in range(warmup + n_tokens):
        start = time.perf_counter()
        token = int(forward(model, [token], cache, vocab, keep=1)[0].argmax())
        if sync:
            torch.cuda.synchronize()
        if i >= warmup:
            times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)
