"""A llama GGUF file as a Hugging Face folder, its vocabulary parsed once.

transformers loads a GGUF itself (`from_pretrained(..., gguf_file=...)`), but for llama files
its path parses the whole metadata with gguf's reader three times (for the tokenizer, the
config and the weights) and builds gguf's tensor-name table once per module, 397 times for
SmolLM2: 20-30 s on a 2-core machine for a 135M model, most of a new user's first launch.
Here transformers' own fast metadata reader (which leaves the vocabulary's arrays unread
unless asked) reads the config and the tensor table, the tokenizer's loader reads the
vocabulary through it once, gguf dequantises, and gguf's name table is built once. The
folder written is the one transformers writes: tests/test_smollm2.py holds digests of its
conversion and checks this one against them.
"""

from __future__ import annotations

from pathlib import Path

# metadata key under "llama." -> LlamaConfig field (transformers' GGUF_CONFIG_MAPPING["llama"])
CONFIG_KEYS = {
    "context_length": "max_position_embeddings",
    "block_count": "num_hidden_layers",
    "feed_forward_length": "intermediate_size",
    "embedding_length": "hidden_size",
    "rope.dimension_count": "head_dim",
    "rope.freq_base": "rope_theta",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "vocab_size": "vocab_size",
}
TOKEN_IDS = {
    "bos_token_id": "bos_token_id",
    "eos_token_id": "eos_token_id",
    "unknown_token_id": "unk_token_id",
    "padding_token_id": "pad_token_id",
}


class GGUFConversionError(Exception):
    """The file is not a llama GGUF this module can convert; the message says what it holds."""


def llama_config(metadata: dict, tensor_names: tuple[str, ...]):
    """The LlamaConfig a llama GGUF's metadata describes."""
    from transformers import LlamaConfig

    architecture = metadata.get("general.architecture")
    if architecture != "llama":
        raise GGUFConversionError(f"expected a llama GGUF, this one is {architecture!r}")
    fields = {name: metadata[f"llama.{key}"] for key, name in CONFIG_KEYS.items()
              if f"llama.{key}" in metadata}  # fmt: skip
    fields.update({name: metadata[f"tokenizer.ggml.{key}"] for key, name in TOKEN_IDS.items()
                   if f"tokenizer.ggml.{key}" in metadata})  # fmt: skip
    if "general.name" in metadata:
        fields["_model_name_or_path"] = metadata["general.name"]
    # no output.weight: the head is the embedding
    fields["tie_word_embeddings"] = "output.weight" not in tensor_names
    return LlamaConfig(**fields)


def unpermute_rows(weight, heads: int):
    """Undo the row order llama.cpp's converter gives q_proj and k_proj (rotary halves
    interleaved per head): [heads * dim, in] back to Hugging Face's."""
    rows = weight.shape[0] // heads // 2
    return weight.reshape(heads, rows, 2, *weight.shape[1:]).swapaxes(2, 1).reshape(weight.shape)


def llama_state_dict(path: Path, config) -> dict:
    """{Hugging Face name: float32 tensor} for every tensor of a llama GGUF."""
    import gguf
    import numpy as np
    import torch
    from transformers import LlamaForCausalLM
    from transformers.integrations.gguf import GgufHeader, load_gguf_state_dict

    header = GgufHeader.from_file(str(path))
    stored = load_gguf_state_dict(header)  # {gguf name: bytes in the file, not read yet}
    types = header.ggml_types
    with torch.device("meta"):
        names = list(LlamaForCausalLM(config).state_dict())
    table = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    state = {}
    for name in names:
        base, _, suffix = name.rpartition(".")
        gguf_name = f"{table.get_name(base)}.{suffix}"
        if gguf_name not in stored:
            if name == "lm_head.weight" and config.tie_word_embeddings:
                continue
            raise GGUFConversionError(f"{path.name} has no {gguf_name} (for {name})")
        lazy = stored.pop(gguf_name)
        raw = np.asarray(lazy.data).reshape(*lazy.shape[:-1], -1)  # [..., bytes a row]
        weight = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType(types[gguf_name]))
        if gguf_name.endswith("attn_q.weight"):
            weight = unpermute_rows(weight, config.num_attention_heads)
        elif gguf_name.endswith("attn_k.weight"):
            weight = unpermute_rows(weight, config.num_key_value_heads)
        # a copy: the file's pages are read-only
        state[name] = torch.from_numpy(np.array(weight, dtype=np.float32))
    if stored:
        raise GGUFConversionError(f"{path.name} holds tensors a llama model has no place for: "
                                  f"{', '.join(sorted(stored)[:5])}")  # fmt: skip
    return state


def write_llama_folder(folder: Path, path: Path, dtype) -> None:
    """A Hugging Face folder (model in `dtype`, config, tokenizer) from a llama GGUF file."""
    from transformers import LlamaForCausalLM, PreTrainedTokenizerFast
    from transformers.integrations.gguf import read_gguf_metadata

    metadata, tensor_names = read_gguf_metadata(str(path))
    config = llama_config(metadata, tensor_names)
    state = llama_state_dict(path, config)
    model = LlamaForCausalLM(config)  # the rotary buffers computed; every weight replaced below
    model.load_state_dict(state, strict=not config.tie_word_embeddings)
    model.tie_weights()
    model.to(dtype).save_pretrained(folder)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path.parent, gguf_file=path.name)
    tokenizer.save_pretrained(folder)
