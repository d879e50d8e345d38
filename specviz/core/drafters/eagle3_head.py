"""The EAGLE-3 head as a torch module, in the speculators layout (Li et al., "EAGLE-3",
arXiv:2503.01840; vllm-project/speculators `models/eagle3`; vLLM `llama_eagle3.py`).

The head reads the target's own hidden states. At position t+1 it takes the pair (token
x_{t+1}, state g_t) and predicts x_{t+2}: g_t is `fc` of the target's aux layers at t (the
inputs of layers `eagle_aux_hidden_state_layer_ids`, transformers' `hidden_states[i]`) for
positions the target has run, and the head's own output at t for positions it drafted
itself. One decoder layer whose q/k/v read [norm(embed(x)), norm(g)] (2 x hidden), then the
head's norm and a head over the draft vocabulary; `d2t` maps a draft id to the target's
(target id = draft id + d2t[draft id]).

Parameter names are speculators' (fc, layers.0.*, norm, lm_head), so a state dict loads and
saves as the format stores it (core.drafters.eagle3_format).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import DynamicCache, LlamaConfig
from transformers.models.llama.modeling_llama import (
    LlamaMLP,
    LlamaRMSNorm,
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
)


@dataclass(frozen=True)
class HeadConfig:
    """What a head is, read from its config.json (core.drafters.eagle3_format)."""

    layer: LlamaConfig  # transformer_layer_config: the decoder layer's shapes and RoPE
    aux_layers: tuple[int, ...]  # the target's layers whose inputs the head reads
    draft_vocab: int  # rows of lm_head
    target_vocab: int  # the target's vocabulary (transformer_layer_config.vocab_size)
    target_hidden: int  # width of each aux state (the target's hidden size)
    norm_before_residual: bool = False  # the residual is norm(g) instead of g
    speculative_tokens: int = 3  # speculators_config: the K it was trained for
    verifier: str | None = None  # speculators_config.verifier.name_or_path

    @property
    def hidden(self) -> int:
        return self.layer.hidden_size


class Eagle3Attention(nn.Module):
    """Self-attention whose q/k/v read 2 x hidden (the embedding and the state, each
    normed); grouped KV heads, RoPE, an optional KV cache (layer 0 of a DynamicCache)."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        bias = bool(getattr(config, "attention_bias", False))
        width = 2 * config.hidden_size
        self.q_proj = nn.Linear(width, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(width, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(width, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, config.hidden_size, bias=bias)

    def forward(self, x, rope, mask, cache: DynamicCache | None) -> torch.Tensor:
        n = x.shape[0]  # x [T, 2H]
        q = self.q_proj(x).view(n, self.heads, self.head_dim).transpose(0, 1)[None]
        k = self.k_proj(x).view(n, self.kv_heads, self.head_dim).transpose(0, 1)[None]
        v = self.v_proj(x).view(n, self.kv_heads, self.head_dim).transpose(0, 1)[None]
        cos, sin = rope
        q, k = apply_rotary_pos_emb(q, k, cos[None], sin[None])  # [1, heads, T, d]
        if cache is not None:
            k, v = cache.update(k, v, 0)  # [1, kv_heads, S, d]: everything cached so far
        out = nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, enable_gqa=self.heads != self.kv_heads
        )  # [1, heads, T, d]
        return self.o_proj(out[0].transpose(0, 1).reshape(n, -1))  # [T, H]


class Eagle3Layer(nn.Module):
    """speculators' LlamaDecoderEagle3FirstLayer: norms on both halves, then attention and
    MLP with residuals from the state half."""

    def __init__(self, config: LlamaConfig, norm_before_residual: bool):
        super().__init__()
        eps = config.rms_norm_eps
        self.norm_before_residual = norm_before_residual
        self.input_layernorm = LlamaRMSNorm(config.hidden_size, eps=eps)
        self.hidden_norm = LlamaRMSNorm(config.hidden_size, eps=eps)
        self.self_attn = Eagle3Attention(config)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps=eps)
        self.mlp = LlamaMLP(config)

    def forward(self, embeds, states, rope, mask, cache) -> torch.Tensor:
        residual = states
        states = self.hidden_norm(states)
        if self.norm_before_residual:
            residual = states
        x = torch.cat([self.input_layernorm(embeds), states], -1)  # [T, 2H]
        h = residual + self.self_attn(x, rope, mask, cache)
        return h + self.mlp(self.post_attention_layernorm(h))  # [T, H], before the norm


class Eagle3Head(nn.Module):
    """fc + one Eagle3Layer + norm + lm_head, and the draft-to-target map."""

    def __init__(self, config: HeadConfig):
        super().__init__()
        self.config = config
        hidden = config.hidden
        self.fc = nn.Linear(len(config.aux_layers) * config.target_hidden, hidden, bias=False)
        self.layers = nn.ModuleList([Eagle3Layer(config.layer, config.norm_before_residual)])
        self.norm = LlamaRMSNorm(hidden, eps=config.layer.rms_norm_eps)
        self.lm_head = nn.Linear(hidden, config.draft_vocab, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(config.layer)
        d2t = torch.zeros(config.draft_vocab, dtype=torch.long)  # identity map
        self.register_buffer("d2t", d2t, persistent=True)

    @property
    def draft_to_target(self) -> torch.Tensor:
        """[draft_vocab] the target id of each draft id."""
        return torch.arange(self.config.draft_vocab, device=self.d2t.device) + self.d2t

    def project(self, aux: torch.Tensor) -> torch.Tensor:
        """[T, n_aux x target_hidden] aux states -> [T, H] the head's input states."""
        return self.fc(aux.to(self.fc.weight.dtype))

    def forward(
        self,
        embeds: torch.Tensor,
        states: torch.Tensor,
        positions: torch.Tensor,
        mask: torch.Tensor | None = None,
        cache: DynamicCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits [T, draft_vocab], out [T, H]) of `layer_out`'s arguments."""
        out = self.layer_out(embeds, states, positions, mask, cache)
        return self.logits(out), out

    def layer_out(
        self,
        embeds: torch.Tensor,
        states: torch.Tensor,
        positions: torch.Tensor,
        mask: torch.Tensor | None = None,
        cache: DynamicCache | None = None,
    ) -> torch.Tensor:
        """out [T, H], the decoder layer's output before the norm: embeds [T, H] of x_{t+1},
        states [T, H] (projected aux states or the head's own outputs), positions [T] (t + 1).
        mask: an additive [1, 1, T, S] over the cache and these T rows; None: causal."""
        dtype = self.fc.weight.dtype
        embeds, states = embeds.to(dtype), states.to(dtype)
        rope = self.rotary_emb(states, positions[None])  # ([1, T, d], [1, T, d])
        rope = (rope[0][0], rope[1][0])
        if mask is None:
            past = cache.get_seq_length() if cache is not None else 0
            mask = causal_mask(states.shape[0], past, dtype, states.device)
        return self.layers[0](embeds, states, rope, mask, cache)

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        """[T, H] the layer's outputs -> [T, draft_vocab] (training takes the rows it scores)."""
        return self.lm_head(self.norm(out))


def causal_mask(n: int, past: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    """Additive [1, 1, n, past + n]: row i sees the past and rows <= i."""
    visible = torch.ones((n, past + n), dtype=torch.bool, device=device).tril(past)
    mask = torch.zeros((n, past + n), dtype=dtype, device=device)
    return mask.masked_fill(~visible, torch.finfo(dtype).min)[None, None]
