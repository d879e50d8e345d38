"""Prompt sets with categories, for sweeps: JSON Lines or plain text, one prompt a line.

JSON Lines: `{"category": "code", "prompt": "def f(x):\\n"}` per line (`category` optional,
"default" when absent; `#` lines are comments). Plain text: one prompt a line, `#` starts a
comment line, and the two characters `\\n` stand for a line break. The shipped set is
resources/prompts/tune.jsonl.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from specviz.core.models.builtin import resources_dir
from specviz.core.resources import read_text_bounded

DEFAULT_CATEGORY = "default"
MAX_PROMPTS = 10_000


class PromptSetError(ValueError):
    """A prompt file that cannot be used; the message names the file and the line."""


@dataclass(frozen=True)
class Prompt:
    category: str
    text: str


def shipped_set() -> Path:
    return resources_dir() / "prompts" / "tune.jsonl"


def load_prompt_set(path: str | Path | None = None) -> list[Prompt]:
    """The prompts of a JSONL or plain-text file (the shipped set when path is None)."""
    path = Path(path) if path is not None else shipped_set()
    try:
        text = read_text_bounded(path)
    except FileNotFoundError:
        raise PromptSetError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise PromptSetError(f"{path}: is a folder, not a prompt file") from None
    except UnicodeDecodeError as e:
        raise PromptSetError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise PromptSetError(f"{path}: cannot read it ({e.strerror or e})") from None
    lines = text.splitlines()
    first = next((line.strip() for line in lines if line.strip()), "")
    is_jsonl = path.suffix.lower() in (".jsonl", ".json") or first.startswith("{")
    prompts = _parse_jsonl(path, lines) if is_jsonl else _parse_text(lines)
    if not prompts:
        raise PromptSetError(f"{path}: holds no prompts")
    if len(prompts) > MAX_PROMPTS:
        raise PromptSetError(f"{path}: {len(prompts)} prompts, at most {MAX_PROMPTS}")
    return prompts


def _parse_jsonl(path: Path, lines: list[str]) -> list[Prompt]:
    prompts = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue  # blank lines and comments
        where = f"{path}: line {number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise PromptSetError(f"{where}: not JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise PromptSetError(f'{where}: expected an object {{"prompt": ...}}')
        prompt = obj.get("prompt")
        category = obj.get("category", DEFAULT_CATEGORY)
        if not isinstance(prompt, str) or not prompt.strip():
            raise PromptSetError(f"{where}: 'prompt' must be a non-empty string")
        if not isinstance(category, str) or not category.strip():
            raise PromptSetError(f"{where}: 'category' must be a non-empty string")
        prompts.append(Prompt(category.strip(), prompt))
    return prompts


def _parse_text(lines: list[str]) -> list[Prompt]:
    return [
        Prompt(DEFAULT_CATEGORY, line.replace("\\n", "\n"))
        for line in lines
        if line.strip() and not line.lstrip().startswith("#")
    ]


def categories(prompts: list[Prompt]) -> list[str]:
    """Categories in order of first appearance."""
    return list(dict.fromkeys(p.category for p in prompts))


def chat_prompts(prompts: list[Prompt], pair, chat: bool | None, progress=None) -> list[Prompt]:
    """The prompts as the models read them: user turns of the target's chat template for
    an instruct target (chat None) or when asked (True), else as written (ValueError: chat
    asked for and the tokenizer has no template)."""
    from specviz.core.models.chat import session_prompt

    out = [dataclasses.replace(p, text=session_prompt(pair, p.text, chat)[0]) for p in prompts]
    if progress and prompts and out[0].text != prompts[0].text:
        why = session_prompt(pair, prompts[0].text, chat)[1]["why"]
        progress(f"the prompts are user turns of the chat template ({why}; --no-chat: raw)")
    return out
