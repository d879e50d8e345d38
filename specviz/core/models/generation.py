"""A model's own generation settings (generation_config.json) and chat template."""

from __future__ import annotations

from specviz.core.models.pair import ModelLoadError

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


def chat_prompt(tokenizer, text: str) -> str:
    """`text` as a user turn in the tokenizer's chat template, ready for the assistant's
    answer; ModelLoadError when the tokenizer has no template."""
    return chat_messages(tokenizer, [{"role": "user", "content": text}])


def chat_messages(tokenizer, messages: list[dict]) -> str:
    """A conversation ({"role", "content"} each, the last a user turn) in the tokenizer's
    chat template, ready for the assistant's answer; ModelLoadError without a template."""
    if not getattr(tokenizer, "chat_template", None):
        raise ModelLoadError(
            "--chat: the target's tokenizer has no chat template (not an instruct model?); "
            "leave out --chat to continue the prompt as plain text"
        )
    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception as e:  # noqa: BLE001 - a template is code from the model's folder
        raise ModelLoadError(f"--chat: the chat template failed: {e}") from None
