"""Trace lines -> records: the structure checks of specviz.core.tracefile's reader.

Strict about structure: a missing field or a value of the wrong type is a TraceError naming
the line and the field ("tokens[2].p"). Tolerant about the future: unknown header fields
are kept in SessionHeader.extra, unknown round, token and settings fields are ignored.
Written for speed: a round line at top-N 20 holds about a hundred [id, p, q] entries, and a
trace may hold 100k rounds, so list checks use C-level map() passes, not Python loops.
"""

from __future__ import annotations

import sys
from typing import Any

from .trace import (
    SCHEMA_MAJOR,
    STATUSES,
    ModelInfo,
    Round,
    SessionHeader,
    Settings,
    TokenEvent,
    TraceError,
)

_HEADER_KEYS = {
    "type",
    "schema",
    "specviz",
    "session_id",
    "created",
    "prompt",
    "prompt_ids",
    "prompt_text",
    "target",
    "draft",
    "settings",
    "baseline_ms_per_token",
    "draft_ms_per_token",
}
_STATUSES = frozenset(STATUSES)
_NUMBER_FIELDS = ("p", "q", "accept_prob", "u", "alpha", "residual", "p_rest", "q_rest")
_NUMBER_TYPES = {float, int, type(None)}
_SETTINGS_KINDS = {
    name: float if isinstance(default, float) else int for name, default in vars(Settings()).items()
}
_KINDS = {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "an object"}


def type_error(value: Any, kind: type, line: int, name: str) -> TraceError:
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    return TraceError(f"expected {_KINDS.get(kind, kind.__name__)}, got {shown}", line, name)


def _get(
    obj: dict[str, Any], key: str, kind: type, line: int, optional: bool = False, prefix: str = ""
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
        return float(value)
    raise type_error(value, kind, line, prefix + key)


def _model(obj: dict[str, Any], line: int, key: str) -> ModelInfo:
    prefix = f"{key}."
    return ModelInfo(
        name=_get(obj, "name", str, line, prefix=prefix),
        path=_get(obj, "path", str, line, prefix=prefix),
        vocab_size=_get(obj, "vocab_size", int, line, prefix=prefix),
        params=_get(obj, "params", int, line, prefix=prefix),
        dtype=_get(obj, "dtype", str, line, prefix=prefix),
        device=_get(obj, "device", str, line, prefix=prefix),
    )


def _settings(obj: dict[str, Any], line: int, key: str = "settings") -> Settings:
    values = {}
    for name, kind in _SETTINGS_KINDS.items():
        value = _get(obj, name, kind, line, optional=True, prefix=f"{key}.")
        if value is not None:
            values[name] = value
    return Settings(**values)  # unknown settings (a newer minor version) are ignored


def _strings(value: Any, line: int, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if type(value) is not list or not set(map(type, value)) <= {str}:
        raise TraceError("expected a list of strings", line, name)
    return tuple(map(sys.intern, value))  # token texts repeat: one copy of each


def _top(value: Any, line: int, name: str, width: int) -> tuple:
    """[[id, p, q], ...] (width 3) or [[id, r], ...] (width 2) -> a tuple of tuples.

    Checked column by column with C-level passes: a round holds (K+1) * N entries.
    """
    if value is None:
        return ()
    shape = "[id, p, q]" if width == 3 else "[id, probability]"
    try:
        if type(value) is not list:
            raise TypeError
        entries = tuple(map(tuple, value))  # a str or dict entry fails the checks below
    except TypeError:
        raise TraceError(f"expected a list of {shape}", line, name) from None
    if not entries:
        return ()
    if set(map(len, entries)) != {width}:
        raise TraceError(f"expected a list of {shape}", line, name)
    ids, *columns = zip(*entries)  # [N] each
    if not set(map(type, ids)) <= {int}:
        raise TraceError(f"expected integer token ids in {shape}", line, name)
    if not set(map(type, columns[0])).union(*(map(type, c) for c in columns[1:])) <= (
        _NUMBER_TYPES
    ):
        raise TraceError(f"expected numbers (or null) in {shape}", line, name)
    return entries


# ---------------------------------------------------------------------------------- records


def parse_header(obj: dict[str, Any], line: int = 1) -> SessionHeader:
    if obj.get("type") != "session":
        raise TraceError("the first line must be the session header (type 'session')", line)
    schema = _get(obj, "schema", str, line)
    name, _, version = schema.partition("/")
    major = version.split(".")[0]
    if name != "specviz.trace" or not major.isdigit():
        raise TraceError(f"not a specviz trace schema: {schema!r}", line, "schema")
    if int(major) != SCHEMA_MAJOR:
        raise TraceError(
            f"schema {schema!r} is not supported by this specviz (it reads "
            f"specviz.trace/{SCHEMA_MAJOR}); a newer specviz may read it",
            line,
            "schema",
        )
    ids = _get(obj, "prompt_ids", list, line)
    if not set(map(type, ids)) <= {int}:
        raise TraceError("expected a list of token ids", line, "prompt_ids")
    return SessionHeader(
        session_id=_get(obj, "session_id", str, line, optional=True) or f"trace-{id(obj):x}",
        prompt=_get(obj, "prompt", str, line),
        prompt_ids=tuple(ids),
        prompt_text=_strings(obj.get("prompt_text"), line, "prompt_text"),
        target=_model(_get(obj, "target", dict, line), line, "target"),
        draft=_model(_get(obj, "draft", dict, line), line, "draft"),
        settings=_settings(_get(obj, "settings", dict, line), line),
        created=_get(obj, "created", str, line, optional=True) or "",
        specviz=_get(obj, "specviz", str, line, optional=True) or "",
        baseline_ms_per_token=_get(obj, "baseline_ms_per_token", float, line, optional=True),
        draft_ms_per_token=_get(obj, "draft_ms_per_token", float, line, optional=True),
        extra={k: v for k, v in obj.items() if k not in _HEADER_KEYS},
    )


def parse_event(obj: Any, line: int, where: str) -> TokenEvent:
    """One token of a round line; `where` ("tokens[3]") prefixes the field names."""
    if type(obj) is not dict:
        raise TraceError("expected an object", line, where)
    prefix = f"{where}."
    status = _get(obj, "status", str, line, prefix=prefix)
    if status not in _STATUSES:
        raise TraceError(
            f"unknown status {status!r} (one of {', '.join(STATUSES)})", line, prefix + "status"
        )
    numbers = {}
    get = obj.get
    for name in _NUMBER_FIELDS:
        value = get(name)
        if value is not None and type(value) is not float:
            if type(value) is not int:
                raise type_error(value, float, line, prefix + name)
            value = float(value)
        numbers[name] = value
    return TokenEvent(
        id=_get(obj, "id", int, line, prefix=prefix),
        text=sys.intern(_get(obj, "text", str, line, prefix=prefix)),
        status=status,
        top=_top(get("top"), line, prefix + "top", 3),
        residual_top=_top(get("residual_top"), line, prefix + "residual_top", 2),
        top_text=_strings(get("top_text"), line, prefix + "top_text"),
        residual_text=_strings(get("residual_text"), line, prefix + "residual_text"),
        **numbers,
    )


def parse_round(
    obj: dict[str, Any], session_id: str, line: int, settings_cache: dict | None = None
) -> Round:
    tokens = _get(obj, "tokens", list, line)
    settings = obj.get("settings")
    if settings is not None:
        if type(settings) is not dict:
            raise type_error(settings, dict, line, "settings")
        settings = _cached_settings(settings, line, settings_cache)
    return Round(
        session_id=session_id,
        index=_get(obj, "index", int, line),
        context_len=_get(obj, "context_len", int, line),
        draft_ms=_get(obj, "draft_ms", float, line),
        verify_ms=_get(obj, "verify_ms", float, line),
        n_drafted=_get(obj, "n_drafted", int, line),
        n_accepted=_get(obj, "n_accepted", int, line),
        tokens=tuple(parse_event(t, line, f"tokens[{i}]") for i, t in enumerate(tokens)),
        settings=settings,
        finish_reason=_get(obj, "finish_reason", str, line, optional=True),
    )


def _cached_settings(obj: dict[str, Any], line: int, cache: dict | None) -> Settings:
    """Rounds repeat the same settings: parse each distinct one once and share the record."""
    if cache is None:
        return _settings(obj, line)
    try:
        key = tuple(obj.items())
        found = cache.get(key)
    except TypeError:  # an unhashable value: let the parser name it
        return _settings(obj, line)
    if found is None:
        found = cache[key] = _settings(obj, line)
    return found
