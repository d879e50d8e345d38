"""Records -> JSON: the trace's lines as dicts, and their bytes (orjson).

The reverse, JSON -> records with errors naming line and field, is specviz.core.trace.parse.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from specviz.core.trace import verifiers
from specviz.core.trace.extras.registry import extras_json
from specviz.core.trace.records import (
    EVENT_LISTS,
    EVENT_NUMBERS,
    HEADER_FIELDS,
    HEADER_OPTIONAL,
    ROUND_FIELDS,
    ROUND_OPTIONAL,
    SCHEMA,
    TREE_SETTINGS,
    ModelInfo,
    Round,
    SessionHeader,
    Settings,
    TokenEvent,
)


def header_to_json(header: SessionHeader) -> dict[str, Any]:
    obj: dict[str, Any] = dict(header.extra)
    obj.update(type="session", schema=SCHEMA)
    for name in HEADER_FIELDS:
        value = getattr(header, name)
        if value is None and name in HEADER_OPTIONAL:
            continue
        if isinstance(value, Settings):
            value = settings_to_json(value)
        elif isinstance(value, ModelInfo):
            value = dataclasses.asdict(value)
        obj[name] = value
    return obj


def event_to_json(event: TokenEvent) -> dict[str, Any]:
    obj = {"id": event.id, "text": event.text, "status": event.status}
    for name in EVENT_NUMBERS:
        value = getattr(event, name)
        if value is not None:
            obj[name] = value
    for name in EVENT_LISTS:
        value = getattr(event, name)
        if value:
            obj[name] = value
    return obj


def round_to_json(rnd: Round) -> dict[str, Any]:
    obj: dict[str, Any] = {"type": "round"}
    for name in ROUND_FIELDS:
        value = getattr(rnd, name)
        if value is None and name in ROUND_OPTIONAL:
            continue
        if name == "tokens":
            value = [event_to_json(t) for t in value]
        elif name == "settings":
            value = settings_to_json(value)
        obj[name] = value
    obj.update(extras_json(rnd.extras))  # after the fields every round has, in the registry's order
    return obj


def settings_to_json(settings: Settings) -> dict[str, Any]:
    """dataclasses.asdict for a record of plain numbers, without its recursive copy: every
    round line carries its settings, and a round's line is made about 1.5x faster without
    it (benchmarks/trace_write.py). A rule's options (typical's epsilon and delta) go with
    that rule only, the tree's with a tree (a chain's line is as it was before schema 1.5)."""
    names = _PLAIN_SETTINGS
    rule = verifiers.SPECS.get(settings.verifier)
    if rule is not None and rule.options:
        names = (*names, *rule.options)
    if settings.tree:
        names = (*names, *TREE_SETTINGS)
    return {name: getattr(settings, name) for name in names}


_SETTINGS_FIELDS = tuple(f.name for f in dataclasses.fields(Settings))
_PLAIN_SETTINGS = tuple(
    name for name in _SETTINGS_FIELDS if name not in (*verifiers.options(), *TREE_SETTINGS)
)


def _plain_number(value: Any) -> float | int:
    """What orjson does not write by itself and json did: subclasses of float and int."""
    if isinstance(value, float):
        return float(value)
    if isinstance(value, int):
        return int(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(obj: dict[str, Any]) -> str:
    """One compact JSON line, UTF-8 text as is. orjson writes each float in its shortest
    round-tripping form (a trace reads back bit for bit), tuples as lists, numpy scalars
    as numbers and a non-finite float as null; 21 times faster than json and the cleaning
    pass it replaced (benchmarks/trace_write.py)."""
    return dumps_bytes(obj).decode()


def dumps_bytes(obj: dict[str, Any]) -> bytes:
    """dumps as UTF-8 bytes, as a socket or a binary file takes them."""
    return orjson.dumps(obj, default=_plain_number, option=orjson.OPT_SERIALIZE_NUMPY)
