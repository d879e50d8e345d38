"""Trace lines -> records: the structure checks of specviz.core.trace.files's reader.

Strict about structure: a missing field or a value of the wrong type is a TraceError naming
the line and the field ("tokens[2].p"). Tolerant about the future: unknown header fields
are kept in SessionHeader.extra, unknown round, token and settings fields are ignored.
Written for speed: a round line at top-N 20 holds about a hundred [id, p, q] entries, and a
trace may hold 100k rounds, so list checks use C-level map() passes, not Python loops.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any

from specviz.core.trace.extras import registry
from specviz.core.trace.fields import as_float, get_field, type_error
from specviz.core.trace.records import (
    EVENT_LISTS,
    EVENT_NUMBERS,
    HEADER_KEYS,
    ROUND_SCALARS,
    SCHEMA_MAJOR,
    STATUSES,
    STOP_REASONS,
    ModelInfo,
    Round,
    SessionHeader,
    Settings,
    TokenEvent,
    TraceError,
)
from specviz.core.trace.rounds import make_round

_STATUSES = frozenset(STATUSES)
_SCALARS = ROUND_SCALARS
_NUMBER_TYPES = {float, int, type(None)}
_FLOAT_OR_NONE = {float, type(None)}
_SETTINGS_KINDS = {name: type(default) for name, default in vars(Settings()).items()}


def _model(obj: dict[str, Any], line: int, key: str) -> ModelInfo:
    prefix = f"{key}."
    return ModelInfo(
        name=get_field(obj, "name", str, line, prefix=prefix),
        path=get_field(obj, "path", str, line, prefix=prefix),
        vocab_size=get_field(obj, "vocab_size", int, line, prefix=prefix),
        params=get_field(obj, "params", int, line, prefix=prefix),
        dtype=get_field(obj, "dtype", str, line, prefix=prefix),
        device=get_field(obj, "device", str, line, prefix=prefix),
    )


def _settings(obj: dict[str, Any], line: int, key: str = "settings") -> Settings:
    """The settings object: a field may be left out (its default), never null (a setting
    is always a finite value, so a null is not a non-finite float written out: it is an
    error, not "absent")."""
    values = {}
    for name in _SETTINGS_KINDS:
        if name in obj and obj[name] is None:
            raise TraceError("null: a setting is left out or given, never null", line,
                             f"{key}.{name}")  # fmt: skip
    for name, kind in _SETTINGS_KINDS.items():
        value = get_field(obj, name, kind, line, optional=True, prefix=f"{key}.")
        if value is not None:
            values[name] = value
    return Settings(**values)  # unknown settings (a newer minor version) are ignored


def _strings(value: Any, line: int, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if type(value) is not list or not set(map(type, value)) <= {str}:
        raise TraceError("expected a list of strings", line, name)
    return tuple(map(sys.intern, value))  # token texts repeat: one copy of each


def _entries(value: Any, line: int, name: str, width: int) -> tuple:
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
    ids, *columns = zip(*entries, strict=True)  # [N] each
    if not set(map(type, ids)) <= {int}:
        raise TraceError(f"expected integer token ids in {shape}", line, name)
    if not set(map(type, columns[0])).union(*(map(type, c) for c in columns[1:])) <= (
        _NUMBER_TYPES
    ):
        raise TraceError(f"expected numbers (or null) in {shape}", line, name)
    return entries


# ---------------------------------------------------------------------------------- records


_SCHEMA = re.compile(r"specviz\.trace/(0|[1-9][0-9]{0,5})(?:\.(0|[1-9][0-9]{0,5}))?", re.ASCII)


def schema_version(schema: str, line: int = 1) -> tuple[int, int]:
    """(major, minor) of "specviz.trace/MAJOR[.MINOR]" (ASCII digits, no leading zeros;
    "specviz.trace/1" is 1.0); TraceError for anything else."""
    found = _SCHEMA.fullmatch(schema)
    if found is None:
        shown = schema if len(schema) <= 60 else schema[:57] + "..."
        raise TraceError(f"not a specviz trace schema: {shown!r}", line, "schema")
    return int(found.group(1)), int(found.group(2) or 0)


def parse_header(obj: dict[str, Any], line: int = 1) -> SessionHeader:
    if obj.get("type") != "session":
        raise TraceError("the first line must be the session header (type 'session')", line)
    schema = get_field(obj, "schema", str, line)
    major, _ = schema_version(schema, line)
    if major != SCHEMA_MAJOR:
        raise TraceError(
            f"schema {schema!r} is not supported by this specviz (it reads "
            f"specviz.trace/{SCHEMA_MAJOR}); a newer specviz may read it",
            line,
            "schema",
        )
    ids = get_field(obj, "prompt_ids", list, line)
    if not set(map(type, ids)) <= {int}:
        raise TraceError("expected a list of token ids", line, "prompt_ids")
    return SessionHeader(
        session_id=get_field(obj, "session_id", str, line, optional=True) or f"trace-{id(obj):x}",
        prompt=get_field(obj, "prompt", str, line),
        prompt_ids=tuple(ids),
        prompt_text=_strings(obj.get("prompt_text"), line, "prompt_text"),
        target=_model(get_field(obj, "target", dict, line), line, "target"),
        draft=_model(get_field(obj, "draft", dict, line), line, "draft"),
        settings=_settings(get_field(obj, "settings", dict, line), line),
        created=get_field(obj, "created", str, line, optional=True) or "",
        specviz=get_field(obj, "specviz", str, line, optional=True) or "",
        baseline_ms_per_token=get_field(obj, "baseline_ms_per_token", float, line, optional=True),
        draft_ms_per_token=get_field(obj, "draft_ms_per_token", float, line, optional=True),
        drafter=_kind_object(obj, "drafter", line),
        policy=_kind_object(obj, "policy", line),
        eos_token_id=get_field(obj, "eos_token_id", int, line, optional=True),
        chat=get_field(obj, "chat", dict, line, optional=True),
        dtype_choice=get_field(obj, "dtype_choice", dict, line, optional=True),
        extra={k: v for k, v in obj.items() if k not in HEADER_KEYS},
    )


def _kind_object(obj: dict[str, Any], key: str, line: int) -> dict[str, Any] | None:
    """An optional {"kind": name, ...parameters} object (schema 1.1: drafter, policy)."""
    value = get_field(obj, key, dict, line, optional=True)
    if value is not None:
        get_field(value, "kind", str, line, prefix=f"{key}.")
    return value


def _round_extras(obj: dict[str, Any], line: int) -> dict[str, Any]:
    """The optional round fields of schema 1.1 and after, type-checked, and the round's
    extras (core.trace.extras.registry), each read strictly by its own class; absent ones
    are left out."""
    extras: dict[str, Any] = {}
    if "k" in obj:
        extras["k"] = get_field(obj, "k", int, line, optional=True)
    if "stop" in obj:
        stop = extras["stop"] = get_field(obj, "stop", str, line, optional=True)
        if stop is not None and stop not in STOP_REASONS:
            raise TraceError(
                f"unknown stop reason {stop!r} (one of {', '.join(STOP_REASONS)})", line, "stop"
            )
    if "events_ms" in obj:
        extras["events_ms"] = get_field(obj, "events_ms", float, line, optional=True)
    for cls in registry.EXTRAS:
        if cls.key in obj:
            value = get_field(obj, cls.key, cls.json_type, line, optional=True)
            if value is not None:
                extras[cls.key] = cls.from_json(value, line)
    return extras


def parse_event(obj: Any, line: int, where: str) -> TokenEvent:
    """One token of a round line; `where` ("tokens[3]") prefixes the field names.

    Written for the half million tokens of a 100k-round trace: a token whose fields have
    their usual types is checked in a few C-level passes; _event_fault names anything else.
    """
    if type(obj) is not dict:
        raise TraceError("expected an object", line, where)
    get = obj.get
    id_, text, status = get("id"), get("text"), get("status")
    numbers = tuple(map(get, EVENT_NUMBERS))
    if (
        type(id_) is not int
        or type(text) is not str
        or type(status) is not str
        or status not in _STATUSES
        or not set(map(type, numbers)) <= _FLOAT_OR_NONE
    ):
        id_, text, status, numbers = _event_fault(obj, line, f"{where}.")
    if obj.keys().isdisjoint(EVENT_LISTS):
        return TokenEvent(id_, sys.intern(text), status, *numbers)
    prefix = f"{where}."
    return TokenEvent(
        id_,
        sys.intern(text),
        status,
        *numbers,
        top=_entries(get("top"), line, prefix + "top", 3),
        top_text=_strings(get("top_text"), line, prefix + "top_text"),
        residual_top=_entries(get("residual_top"), line, prefix + "residual_top", 2),
        residual_text=_strings(get("residual_text"), line, prefix + "residual_text"),
        unjudged_top_p=_numbers(get("unjudged_top_p"), line, prefix + "unjudged_top_p"),
    )


def _numbers(value: Any, line: int, name: str) -> tuple[float, ...]:
    """A list of numbers (schema 1.2's unjudged_top_p), integers read as floats."""
    if value is None:
        return ()
    if type(value) is not list or not set(map(type, value)) <= {float, int}:
        raise TraceError("expected a list of numbers", line, name)
    if int in set(map(type, value)):
        return tuple(as_float(v, line, name) if type(v) is int else v for v in value)
    return tuple(value)


def _event_fault(obj: dict[str, Any], line: int, prefix: str) -> tuple:
    """parse_event's fields one by one: integers where numbers go become floats, anything
    else of the wrong type is a TraceError naming the field."""
    status = get_field(obj, "status", str, line, prefix=prefix)
    if status not in _STATUSES:
        raise TraceError(
            f"unknown status {status!r} (one of {', '.join(STATUSES)})", line, prefix + "status"
        )
    numbers = tuple(get_field(obj, name, float, line, True, prefix) for name in EVENT_NUMBERS)
    return (
        get_field(obj, "id", int, line, prefix=prefix),
        get_field(obj, "text", str, line, prefix=prefix),
        status,
        numbers,
    )


def parse_round(
    obj: dict[str, Any],
    session_id: str,
    line: int,
    settings_cache: dict | None = None,
    fill: Callable[[Any, str], Any] | None = None,  # round_lines.split_top_lists's
) -> Round:
    tokens = get_field(obj, "tokens", list, line)
    settings = obj.get("settings")
    if settings is not None:
        if type(settings) is not dict:
            raise type_error(settings, dict, line, "settings")
        settings = _cached_settings(settings, line, settings_cache)
    extras = _round_extras(obj, line)
    fill = fill or (lambda token, where: token)  # the tokens as read
    events = tuple(parse_event(fill(t, w := f"tokens[{i}]"), line, w) for i, t in enumerate(tokens))
    for key, extra in extras.items():
        if key not in _SCALARS:
            events = extra.read_tokens(events)  # an older tree's, as 1.9 writes them
    return make_round(
        session_id=session_id,
        index=get_field(obj, "index", int, line),
        context_len=get_field(obj, "context_len", int, line),
        draft_ms=get_field(obj, "draft_ms", float, line),
        verify_ms=get_field(obj, "verify_ms", float, line),
        n_drafted=get_field(obj, "n_drafted", int, line),
        n_accepted=get_field(obj, "n_accepted", int, line),
        tokens=events,
        settings=settings,
        finish_reason=get_field(obj, "finish_reason", str, line, optional=True),
        extras=extras,
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


def line_text(raw: str | bytes, number: int) -> str:
    """A line as text (a byte-order mark allowed on line 1); TraceError if not UTF-8."""
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as e:
        raise TraceError(f"not UTF-8 text ({e.reason} at byte {e.start})", number) from None


def _json_int(digits: str) -> int | float:
    """An integer literal as orjson reads it: beyond 64 bits it is a float (inf if it
    overflows), which a field that takes an integer then refuses by name; never a
    400-digit int for a float() to overflow on later."""
    return int(digits) if len(digits) <= 19 else float(digits)


# A \uD800-\uDFFF escape: half of a UTF-16 pair, which json reads into a str that no
# terminal, file or Qt widget can take when it stands alone (orjson refuses it).
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def line_json(text: str, number: int, hint: str = "") -> Any:
    """A line's JSON value as json reads it (NaN included, integers as orjson reads them);
    TraceError naming the line and the fault if it is not JSON, or holds a string that is
    not text (a lone surrogate escape)."""
    try:
        value = json.loads(text, parse_int=_json_int)
        if _SURROGATE.search(text):
            json.dumps(value, ensure_ascii=False).encode("utf-8")  # fails on a lone one
        return value
    except UnicodeEncodeError as e:
        reason = f"not text: a lone UTF-16 surrogate \\u{ord(e.object[e.start]):x} in a string"
        raise TraceError(reason, number) from None
    except (ValueError, RecursionError) as e:
        detail = f"{e.msg} at column {e.colno}" if isinstance(e, json.JSONDecodeError) else e
        raise TraceError(f"not valid JSON ({detail}){hint}", number) from None
