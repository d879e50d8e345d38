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
saves as the format stores it (core.drafters.eagle3.format).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    """What a head is, read from its config.json (core.drafters.eagle3.format)."""

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

    def forward(self, x, rope, mask, cache: DynamicCache | HeadCache | None) -> torch.Tensor:
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
        )  # [1, heads, T, d]; mask None: every key (one query after the cache)
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
        # (inv_freq's dtype, cos [N, d], sin [N, d]): rotary_emb's float32 rows (rope())
        self._rope: tuple[torch.dtype, torch.Tensor, torch.Tensor] | None = None

    def rope(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """(cos, sin) [T, d] in dtype at positions [T]: rows of a float32 table of
        `rotary_emb` over positions 0..N-1 (a row is what rotary_emb gives for its position
        alone), grown by doubling, so that a draft step indexes two rows instead of
        recomputing them. Rebuilt when the head moves or its inv_freq changes dtype."""
        n = int(positions.max()) + 1 if positions.numel() else 1
        inv = self.rotary_emb.inv_freq
        table = self._rope
        if (table is None or table[1].shape[0] < n or table[1].device != positions.device
                or table[0] != inv.dtype):  # fmt: skip
            size = max(256, 1 << (n - 1).bit_length())
            with torch.inference_mode(False), torch.no_grad():  # a plain tensor: training too
                like = torch.empty(0, device=positions.device)  # float32: the table's dtype
                ids = torch.arange(size, device=positions.device)[None]
                cos, sin = self.rotary_emb(like, ids)  # [1, size, d]
            table = self._rope = (inv.dtype, cos[0], sin[0])
        return table[1][positions].to(dtype), table[2][positions].to(dtype)

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
        cache: DynamicCache | HeadCache | None = None,
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
        cache: DynamicCache | HeadCache | None = None,
    ) -> torch.Tensor:
        """out [T, H], the decoder layer's output before the norm: embeds [T, H] of x_{t+1},
        states [T, H] (projected aux states or the head's own outputs), positions [T] (t + 1).
        mask: an additive [1, 1, T, S] over the cache and these T rows; None: causal."""
        dtype = self.fc.weight.dtype
        embeds, states = embeds.to(dtype), states.to(dtype)
        rope = self.rope(positions, dtype)  # ([T, d], [T, d])
        if mask is None and states.shape[0] > 1:  # one row sees the whole cache: no mask
            past = cache.get_seq_length() if cache is not None else 0
            mask = causal_mask(states.shape[0], past, dtype, states.device)
        return self.layers[0](embeds, states, rope, mask, cache)

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        """[T, H] the layer's outputs -> [T, draft_vocab] (training takes the rows it scores)."""
        return self.lm_head(self.norm(out))


def prune_draft_vocab(head: Eagle3Head, keep: torch.Tensor) -> Eagle3Head:
    """A copy of head whose draft vocabulary is only the draft ids `keep` [n] (e.g. its most
    used): lm_head keeps those rows, d2t maps them to the same target ids, every other
    weight is shared. Taken in ascending draft-id order, so a d2t that was ordered stays so."""
    keep = torch.as_tensor(keep, dtype=torch.long).unique()  # sorted, each once
    if keep.numel() == 0 or int(keep.min()) < 0 or int(keep.max()) >= head.config.draft_vocab:
        raise ValueError(f"keep must name draft ids in 0..{head.config.draft_vocab - 1}")
    weight = head.lm_head.weight
    pruned = Eagle3Head(replace(head.config, draft_vocab=int(keep.numel())))
    pruned.to(device=weight.device, dtype=weight.dtype)
    state = head.state_dict()
    keep = keep.to(weight.device)
    state["lm_head.weight"] = weight.detach()[keep]
    state["d2t"] = head.draft_to_target[keep] - torch.arange(keep.numel(), device=keep.device)
    pruned.load_state_dict(state)
    pruned.embed = getattr(head, "embed", None)  # the head's own embeddings, if it has them
    return pruned.eval()


class HeadCache:
    """The head's KV cache (its one layer) in buffers that grow by doubling: a step writes its
    entry in place where transformers' DynamicCache concatenates (copying the whole cache
    every step), and a crop only moves the length. It answers the calls the head and the
    engine make of a cache: update, get_seq_length, crop (a negative n removes n positions,
    as transformers 5 takes it), and `layers[0].keys` / `.values` (what is cached)."""

    def __init__(self) -> None:
        self.length = 0
        self._k: torch.Tensor | None = None  # [1, kv_heads, capacity, d]
        self._v: torch.Tensor | None = None

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length

    def update(self, k: torch.Tensor, v: torch.Tensor, layer_idx: int = 0):
        """Append k, v [1, kv_heads, T, d]; (keys, values) [1, kv_heads, length, d] cached."""
        end = self.length + k.shape[2]
        if self._k is None or end > self._k.shape[2] or self._k.dtype != k.dtype \
                or self._k.device != k.device:  # fmt: skip
            shape = (*k.shape[:2], max(64, 2 * end), k.shape[3])
            with torch.inference_mode(False), torch.no_grad():  # writable in and out of it
                keys = torch.empty(shape, dtype=k.dtype, device=k.device)
                values = torch.empty(shape, dtype=v.dtype, device=v.device)
                if self.length:
                    keys[:, :, : self.length] = self._k[:, :, : self.length]
                    values[:, :, : self.length] = self._v[:, :, : self.length]
            self._k, self._v = keys, values
        self._k[:, :, self.length : end] = k
        self._v[:, :, self.length : end] = v
        self.length = end
        return self._k[:, :, :end], self._v[:, :, :end]

    def crop(self, n: int) -> None:
        """Drop the last -n positions (n < 0), or keep the first n (n >= 0)."""
        self.length = max(0, self.length + n) if n < 0 else min(self.length, n)

    @property
    def keys(self) -> torch.Tensor | None:
        return None if self._k is None else self._k[:, :, : self.length]

    @property
    def values(self) -> torch.Tensor | None:
        return None if self._v is None else self._v[:, :, : self.length]

    @property
    def layers(self) -> list[HeadCache]:
        return [self]


def causal_mask(n: int, past: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    """Additive [1, 1, n, past + n]: row i sees the past and rows <= i."""
    visible = torch.ones((n, past + n), dtype=torch.bool, device=device).tril(past)
    mask = torch.zeros((n, past + n), dtype=dtype, device=device)
    return mask.masked_fill(~visible, torch.finfo(dtype).min)[None, None]
