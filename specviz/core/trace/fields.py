"""A trace line's fields read strictly: a value of the wrong type is a TraceError naming the
line and the field ("tokens[2].p", "probes.draft_ms"). Shared by the line reader
(core.trace.parse) and the round extras (core.trace.extras), which read their own objects.
"""

from __future__ import annotations

from typing import Any

from specviz.core.trace.records import TraceError

_KINDS = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "an object",
}


def type_error(value: Any, kind: type, line: int | None, name: str) -> TraceError:
    """The TraceError for `value` where a `kind` was expected, the value shown short."""
    try:
        shown = repr(value)
    except ValueError:  # an int of more digits than Python converts to text
        shown = "a value too large to show"
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return TraceError(f"expected {_KINDS.get(kind, kind.__name__)}, got {shown}", line, name)


def get_field(
    obj: dict[str, Any],
    key: str,
    kind: type,
    line: int | None,
    optional: bool = False,
    prefix: str = "",
) -> Any:
    """obj[key] checked against kind (an int is a float; a bool is never a number)."""
    value = obj.get(key)
    if value is None:
        if optional:
            return None
        raise TraceError("missing", line, prefix + key)
    if type(value) is kind:
        return value
    if kind is float and type(value) is int:
        return as_float(value, line, prefix + key)
    raise type_error(value, kind, line, prefix + key)


def as_float(value: int, line: int | None, name: str) -> float:
    """An integer where a number is expected; TraceError if it is too large for a float."""
    try:
        return float(value)
    except OverflowError:
        raise TraceError(f"{len(str(abs(value)))}-digit number: out of range", line, name) from None
