"""Trace lines -> records: the structure checks of specviz.core.trace.files's reader.

Strict about structure: a missing field or a value of the wrong type is a TraceError naming
the line and the field ("tokens[2].p"). Tolerant about the future: unknown header fields
are kept in SessionHeader.extra, unknown round, token and settings fields are ignored.
Written for speed: a round line at top-N 20 holds about a hundred [id, p, q] entries, and a
trace may hold 100k rounds, so list checks use C-level map() passes, not Python loops.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from typing import Any

from specviz.core.trace.records import (
    EVENT_LISTS,
    EVENT_NUMBERS,
    HEADER_KEYS,
    MAX_TREE_BUDGET,
    SCHEMA_MAJOR,
    STATUSES,
    STOP_REASONS,
    ModelInfo,
    Round,
    SessionHeader,
    Settings,
    TokenEvent,
    TraceError,
    make_round,
)
from specviz.core.trace.rule_numbers import (
    parse_block,
    parse_draft_pieces,
    parse_greedy_diff,
    parse_typical,
)
from specviz.core.trace.tree_numbers import parse_tree, read_tried

_STATUSES = frozenset(STATUSES)
_NUMBER_TYPES = {float, int, type(None)}
_FLOAT_OR_NONE = {float, type(None)}
_SETTINGS_KINDS = {name: type(default) for name, default in vars(Settings()).items()}
_KINDS = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "an object",
}


def type_error(value: Any, kind: type, line: int, name: str) -> TraceError:
    try:
        shown = repr(value)
    except ValueError:  # an int of more digits than Python converts to text
        shown = "a value too large to show"
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
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
        return _float(value, line, prefix + key)
    raise type_error(value, kind, line, prefix + key)


def _float(value: int, line: int, name: str) -> float:
    """An integer where a number is expected; TraceError if it is too large for a float."""
    try:
        return float(value)
    except OverflowError:
        raise TraceError(f"{len(str(abs(value)))}-digit number: out of range", line, name) from None


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
    """The settings object: a field may be left out (its default), never null (a setting
    is always a finite value, so a null is not a non-finite float written out: it is an
    error, not "absent")."""
    values = {}
    for name in _SETTINGS_KINDS:
        if name in obj and obj[name] is None:
            raise TraceError("null: a setting is left out or given, never null", line,
                             f"{key}.{name}")  # fmt: skip
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
    schema = _get(obj, "schema", str, line)
    major, _ = schema_version(schema, line)
    if major != SCHEMA_MAJOR:
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
        drafter=_kind_object(obj, "drafter", line),
        policy=_kind_object(obj, "policy", line),
        eos_token_id=_get(obj, "eos_token_id", int, line, optional=True),
        chat=_get(obj, "chat", dict, line, optional=True),
        dtype_choice=_get(obj, "dtype_choice", dict, line, optional=True),
        extra={k: v for k, v in obj.items() if k not in HEADER_KEYS},
    )


def _kind_object(obj: dict[str, Any], key: str, line: int) -> dict[str, Any] | None:
    """An optional {"kind": name, ...parameters} object (schema 1.1: drafter, policy)."""
    value = _get(obj, key, dict, line, optional=True)
    if value is not None:
        _get(value, "kind", str, line, prefix=f"{key}.")
    return value


def _round_extras(obj: dict[str, Any], line: int) -> dict[str, Any]:
    """The optional round fields of schema 1.1 and after, type-checked; absent ones are left
    out."""
    extras: dict[str, Any] = {}
    if "k" in obj:
        extras["k"] = _get(obj, "k", int, line, optional=True)
    if "stop" in obj:
        stop = extras["stop"] = _get(obj, "stop", str, line, optional=True)
        if stop is not None and stop not in STOP_REASONS:
            raise TraceError(
                f"unknown stop reason {stop!r} (one of {', '.join(STOP_REASONS)})", line, "stop"
            )
    if "events_ms" in obj:
        extras["events_ms"] = _get(obj, "events_ms", float, line, optional=True)
    if "probes" in obj:
        extras["probes"] = _probes(_get(obj, "probes", dict, line, optional=True), line)
    for name, read in _ROUND_OBJECTS.items():
        if name in obj:
            extras[name] = read(_get(obj, name, dict, line, optional=True), line)
    if "copied_from" in obj:
        span = _get(obj, "copied_from", list, line, optional=True)
        if span is not None:
            if len(span) != 2 or not set(map(type, span)) <= {int} or not 0 <= span[0] <= span[1]:
                raise TraceError("expected [start, end] positions", line, "copied_from")
            extras["copied_from"] = tuple(span)
    return extras


MATCH_SOURCES = ("request", "cache")
MATCH_CUTS = ("k", "spec_factor", "min_prob", "eos", "end", "policy")


def parse_matched(value: dict[str, Any] | None, line: int) -> dict[str, Any] | None:
    """A suffix-decoding round's `matched` (records.Round.matched), every field checked."""
    if value is None:
        return None
    known = {"source", "length", "count", "probs", "cut"}
    if not set(value) <= known or not {"source", "length", "count", "probs"} <= set(value):
        raise TraceError(f"expected the fields {', '.join(sorted(known))}", line, "matched")
    if value["source"] not in MATCH_SOURCES:
        raise TraceError(f"source must be one of {', '.join(MATCH_SOURCES)}", line, "matched")
    for name in ("length", "count"):
        if type(value[name]) is not int or value[name] < 1:
            raise TraceError(f"{name} must be a positive integer", line, "matched")
    probs = value["probs"]
    if (type(probs) is not list or len(probs) > MAX_TREE_BUDGET
            or not all(type(x) in (int, float) and 0 <= x <= 1 for x in probs)):  # fmt: skip
        raise TraceError("probs must be numbers in [0, 1]", line, "matched")
    if "cut" in value and value["cut"] not in MATCH_CUTS:
        raise TraceError(f"cut must be one of {', '.join(MATCH_CUTS)}", line, "matched")
    return dict(value)


# A round's optional objects and their readers (each checks every field of its object).
_ROUND_OBJECTS = {"block": parse_block, "typical": parse_typical, "tree": parse_tree,
                  "greedy_diff": parse_greedy_diff, "matched": parse_matched,
                  "draft_pieces": parse_draft_pieces}  # fmt: skip

MAX_PASS = MAX_TREE_BUDGET + 1  # tokens in one target pass: a tree's nodes and the last token
MAX_PROBE_STEPS = 64  # timed T_t(1) steps in one probe record, at most


def _probes(value: dict[str, Any] | None, line: int) -> dict[str, Any] | None:
    """A cost-model probe record (core/engine/cost_probes.py): {"context_len": n >= 0, "target_ms":
    [[n, ms], ...] with distinct n in 1..MAX_PASS, "draft_ms": ms, "t1_ms": [ms, ...],
    "rule_ms": ms}, times finite and >= 0.
    Checked here because the cost model folds it into every summary."""
    if value is None:
        return None
    out = dict(value)
    context = _get(value, "context_len", int, line, optional=True, prefix="probes.")
    if context is not None and context < 0:
        raise TraceError(f"{context}: negative", line, "probes.context_len")
    if "draft_ms" in value:  # absent in a probe of T_t(1) alone
        out["draft_ms"] = _probe_ms(value["draft_ms"], line, "probes.draft_ms")
    pairs = _get(value, "target_ms", list, line, optional=True, prefix="probes.")
    if pairs is not None:
        if len(pairs) > MAX_PASS:
            raise TraceError(f"{len(pairs)} entries, more than K + 1", line, "probes.target_ms")
        seen: set[int] = set()
        for i, pair in enumerate(pairs):
            name = f"probes.target_ms[{i}]"
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not int:
                raise TraceError("expected [n, ms] with n an integer", line, name)
            if not 1 <= pair[0] <= MAX_PASS or pair[0] in seen:
                raise TraceError(f"n = {pair[0]}: not a new n in 1..{MAX_PASS}", line, name)
            seen.add(pair[0])
        out["target_ms"] = [
            [n, _probe_ms(ms, line, f"probes.target_ms[{i}]")] for i, (n, ms) in enumerate(pairs)
        ]
    # Schema 1.3, optional: every timed T_t(1) step, and the rule's cost.
    steps = _get(value, "t1_ms", list, line, optional=True, prefix="probes.")
    if steps is not None:
        if len(steps) > MAX_PROBE_STEPS:
            raise TraceError(
                f"{len(steps)} steps, more than {MAX_PROBE_STEPS}", line, "probes.t1_ms"
            )
        out["t1_ms"] = [_probe_ms(ms, line, f"probes.t1_ms[{i}]") for i, ms in enumerate(steps)]
        if None in out["t1_ms"]:
            raise TraceError("expected a time, got null", line, "probes.t1_ms")
    if "rule_ms" in value:
        out["rule_ms"] = _probe_ms(value["rule_ms"], line, "probes.rule_ms")
    return out


def _probe_ms(value: Any, line: int, name: str) -> float | None:
    if value is None:
        return None
    if type(value) not in (int, float):
        raise type_error(value, float, line, name)
    ms = _float(value, line, name) if type(value) is int else value
    if not 0 <= ms < math.inf:
        raise TraceError(f"{ms}: not a time (finite, >= 0)", line, name)
    return ms


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
        return tuple(_float(v, line, name) if type(v) is int else v for v in value)
    return tuple(value)


def _event_fault(obj: dict[str, Any], line: int, prefix: str) -> tuple:
    """parse_event's fields one by one: integers where numbers go become floats, anything
    else of the wrong type is a TraceError naming the field."""
    status = _get(obj, "status", str, line, prefix=prefix)
    if status not in _STATUSES:
        raise TraceError(
            f"unknown status {status!r} (one of {', '.join(STATUSES)})", line, prefix + "status"
        )
    numbers = tuple(_get(obj, name, float, line, True, prefix) for name in EVENT_NUMBERS)
    return (
        _get(obj, "id", int, line, prefix=prefix),
        _get(obj, "text", str, line, prefix=prefix),
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
    tokens = _get(obj, "tokens", list, line)
    settings = obj.get("settings")
    if settings is not None:
        if type(settings) is not dict:
            raise type_error(settings, dict, line, "settings")
        settings = _cached_settings(settings, line, settings_cache)
    extras = _round_extras(obj, line)
    fill = fill or (lambda token, where: token)  # the tokens as read
    events = tuple(parse_event(fill(t, w := f"tokens[{i}]"), line, w) for i, t in enumerate(tokens))
    return make_round(
        session_id=session_id,
        index=_get(obj, "index", int, line),
        context_len=_get(obj, "context_len", int, line),
        draft_ms=_get(obj, "draft_ms", float, line),
        verify_ms=_get(obj, "verify_ms", float, line),
        n_drafted=_get(obj, "n_drafted", int, line),
        n_accepted=_get(obj, "n_accepted", int, line),
        tokens=read_tried(events, extras.get("tree")),  # an older tree's, as 1.9 writes them
        settings=settings,
        finish_reason=_get(obj, "finish_reason", str, line, optional=True),
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
