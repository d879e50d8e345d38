"""Building a Round: the fields every round has, then its extras by name, typed through
core.trace.extras' registry. Above both records (the dataclasses) and the extras (which read
records' tables), so neither imports the other in a circle."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from specviz.core.trace.extras import registry
from specviz.core.trace.records import NO_EXTRAS, ROUND_SCALARS, Extras, Round, Settings, TokenEvent


def make_round(
    *,
    session_id: str,
    index: int,
    context_len: int,
    draft_ms: float,
    verify_ms: float,
    n_drafted: int,
    n_accepted: int,
    tokens: tuple[TokenEvent, ...],
    settings: Settings | None,
    finish_reason: str | None,
    extras: Mapping[str, Any],
) -> Round:
    """The one place a Round is built: by the engine's round (core.engine.round_step,
    chains and trees alike) and by the trace reader (core.trace.parse). The fields every
    round has, then `extras` by name: schema 1.1's k, stop and events_ms, and the round's
    extras by key (core.trace.extras.registry), each typed or in the engine's form (the
    dict it builds; read by the extra's from_value); one left out or None is absent.
    TypeError on a name that is neither, so what a round can record is declared once."""
    unknown = extras.keys() - ROUND_SCALARS - registry.BY_KEY.keys()
    if unknown:
        raise TypeError(f"not a round's extra: {', '.join(sorted(unknown))}")
    typed = {key: registry.as_extra(key, v) for key, v in extras.items() if key in registry.BY_KEY}
    return Round(
        session_id=session_id,
        index=index,
        context_len=context_len,
        draft_ms=draft_ms,
        verify_ms=verify_ms,
        n_drafted=n_drafted,
        n_accepted=n_accepted,
        tokens=tokens,
        settings=settings,
        finish_reason=finish_reason,
        k=extras.get("k"),
        stop=extras.get("stop"),
        events_ms=extras.get("events_ms"),
        extras=_extras_of(registry.ordered(typed)),
    )


def with_extras(rnd: Round, **changes: Any) -> Round:
    """rnd with some extras set (typed, or in the engine's form) or removed (None)."""
    merged = {**rnd.extras, **{key: registry.as_extra(key, v) for key, v in changes.items()}}
    return dataclasses.replace(rnd, extras=_extras_of(registry.ordered(merged)))


def _extras_of(extras: dict[str, Any]) -> Extras:
    return Extras(extras) if extras else NO_EXTRAS
