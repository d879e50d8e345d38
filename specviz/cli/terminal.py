"""Untrusted text (from a trace, a model, a tokenizer) made safe to print on a terminal.

A terminal acts on control characters: ESC starts sequences that retitle the window, clear
the screen or rewrite what was printed, and so do the C1 controls (U+0080-U+009F, e.g. CSI
U+009B). printable() writes each such character as a visible escape (\\x1b, \\x9b, \\u202e);
the text stays readable and nothing in it reaches the terminal as a command.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls; the bidirectional overrides and
# isolates, which reorder what is shown ("Trojan Source"); lone surrogates (undecodable
# bytes that Python carries through surrogateescape), which stdout cannot encode.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_UNSAFE_LINES = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]"
)


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, keep_lines: bool = True) -> str:
    """`text` with every terminal control character written as a visible escape.

    keep_lines=True keeps newlines and tabs (a prompt, a generated text); False escapes
    them too (one-line fields: a model name, a path, a date).
    """
    pattern = _UNSAFE if keep_lines else _UNSAFE_LINES
    return pattern.sub(_escape, str(text))


def printable_fields(value):
    """A JSON-like value (dicts, lists, strings) with every string made printable on one
    line: a report built from untrusted fields, ready to format."""
    if isinstance(value, str):
        return printable(value, keep_lines=False)
    if isinstance(value, dict):
        return {k: printable_fields(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable_fields(v) for v in value]
    return value
