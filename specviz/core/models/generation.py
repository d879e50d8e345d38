"""A model's own generation settings (generation_config.json); its chat template is
core.models.chat's."""

from __future__ import annotations

# What a generation_config.json says about decoding (not its token ids or output flags).
GENERATION_SHOWN = (
    "do_sample", "temperature", "top_k", "top_p", "min_p", "typical_p", "max_new_tokens",
    "max_length", "repetition_penalty", "no_repeat_ngram_size", "num_beams",
)  # fmt: skip

# transformers' GenerationConfig defaults, for the fields a generation_config.json leaves out.
HF_DEFAULTS = {"do_sample": False, "temperature": 1.0, "top_k": 50, "top_p": 1.0}


def generation_settings(config: dict) -> dict:
    """The Settings fields that transformers' generate() would use with this config:
    greedy unless do_sample is true; temperature, top-k and top-p when sampling."""
    full = {**HF_DEFAULTS, **config}
    if not full["do_sample"]:
        out = {"temperature": 0.0}
    else:
        out = {
            "temperature": float(full["temperature"] if full["temperature"] is not None else 1),
            "top_k": int(full["top_k"] or 0),
            "top_p": float(full["top_p"] if full["top_p"] is not None else 1),
        }
    if isinstance(config.get("max_new_tokens"), int):
        out["max_new_tokens"] = config["max_new_tokens"]
    return out


def generation_defaults(model) -> dict:
    """The decoding fields of a model's generation_config.json that differ from
    transformers' defaults; {} when the model has no such file."""
    config = getattr(model, "generation_config", None)
    if config is None or getattr(config, "_from_model_config", False):
        return {}  # made up from config.json by transformers, not the model's own
    try:
        diff = config.to_diff_dict()
    except (AttributeError, TypeError, ValueError):
        return {}
    return {k: diff[k] for k in GENERATION_SHOWN if k in diff}
