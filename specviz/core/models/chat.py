"""Chat by default: an instruct target gets its prompt as a user turn of its chat template.

A target is taken for an instruct model when its tokenizer has a chat template and either
its name (the spec, the folder it was loaded from, the name in its config) says so
(Instruct, chat, -it, SFT, DPO, RLHF) or its generation_config.json ends generation on a
token that the template uses to close a turn (Llama-3's <|eot_id|>, ChatML's <|im_end|>).
builtin:smollm2 (SmolLM2-135M-Instruct) is one; builtin:tiny (no template) is not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# A word of a name that marks an instruct / chat fine-tune: "SmolLM2-135M-Instruct",
# "Llama-2-7b-chat-hf", "gemma-2b-it", "...-sft", "...-dpo".
INSTRUCT_NAME = re.compile(r"(?:^|[-_/. ])(instruct|chat|it|sft|dpo|rlhf)(?=$|[-_/. \d])", re.I)


def template_of(tokenizer) -> str | None:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # several named templates: the default one
        template = template.get("default") or next(iter(template.values()), None)
    return template if isinstance(template, str) and template.strip() else None


def _eos_ids(generation_config) -> list[int]:
    eos = getattr(generation_config, "eos_token_id", None) if generation_config else None
    if isinstance(eos, int):
        return [eos]
    return [i for i in eos if isinstance(i, int)] if isinstance(eos, list | tuple) else []


def instruct_reason(tokenizer, names: Iterable[str], generation_config=None) -> str | None:
    """Why this target is an instruct model (a phrase), or None: no chat template, or
    neither its names (the last two parts of a path or hub id) nor its generation config
    mark it one."""
    template = template_of(tokenizer)
    if template is None:
        return None
    for name in names:
        tail = "/".join(str(name or "").replace("\\", "/").rstrip("/").split("/")[-2:])
        if found := INSTRUCT_NAME.search(tail):
            return (
                f"its name ({tail}) says {found.group(1)!r} and its tokenizer has a chat template"
            )
    if generation_config is not None and not getattr(generation_config, "_from_model_config", 0):
        for eos in _eos_ids(generation_config):
            try:
                text = tokenizer.convert_ids_to_tokens(eos)
            except (IndexError, KeyError, TypeError, ValueError):
                continue
            if isinstance(text, str) and len(text) > 1 and text in template:
                return (
                    f"its generation_config.json ends on {text!r}, which its chat template "
                    "uses to close a turn"
                )
    return None


def pair_names(pair) -> list[str]:
    """The names a loaded target goes by: the spec, its folder, its config's name."""
    config = getattr(pair.target, "config", None)
    return [
        pair.target_info.name,
        pair.target_info.path,
        getattr(pair.tokenizer, "name_or_path", "") or "",
        getattr(config, "_name_or_path", "") or "",
    ]


def pair_instruct_reason(pair) -> str | None:
    """instruct_reason for a loaded core.models.pair.ModelPair."""
    generation_config = getattr(pair.target, "generation_config", None)
    return instruct_reason(pair.tokenizer, pair_names(pair), generation_config)


def render(tokenizer, text: str) -> str:
    """`text` as a user turn in the tokenizer's chat template, ready for the assistant's
    answer; ValueError when the tokenizer has no template or the template fails."""
    return render_messages(tokenizer, [{"role": "user", "content": text}])


def render_messages(tokenizer, messages: list[dict]) -> str:
    """A conversation ({"role", "content"} each, the last a user turn) in the tokenizer's
    chat template, ready for the assistant's answer; ValueError as render's."""
    if template_of(tokenizer) is None:
        raise ValueError(
            "--chat: the target's tokenizer has no chat template (not an instruct model?); "
            "leave out --chat to continue the prompt as plain text"
        )
    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception as e:  # noqa: BLE001 - a template is code from the model's folder
        raise ValueError(f"--chat: the chat template failed: {e}") from None


def session_prompt(pair, text: str, chat: bool | None) -> tuple[str, dict | None]:
    """(the prompt the models read, the header's `chat` record or None). chat None: the
    default (a chat turn for an instruct target, else the raw text); True: the template
    (ValueError if there is none); False: the raw text."""
    reason = None
    if chat is None:
        reason = pair_instruct_reason(pair)
        if reason is None:
            return text, None
    elif not chat:
        return text, None
    rendered = render(pair.tokenizer, text)
    why = f"by default: {reason}" if reason else "asked for (--chat)"
    return rendered, {"user": text, "template": "the target's chat template", "why": why}
