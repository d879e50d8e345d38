"""A round's cost-model probes (schema 1.1; t1_ms and rule_ms 1.3): what the engine timed
after the round, outside its times (core.engine.cost_probes), folded by the cost model
(core.metrics.costmodel) into every summary's speedup.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specviz.core.trace.extras.base import Extra
from specviz.core.trace.fields import as_float, get_field, type_error
from specviz.core.trace.records import MAX_TREE_BUDGET, TraceError

MAX_PASS = MAX_TREE_BUDGET + 1  # tokens in one target pass: a tree's nodes and the last token
MAX_PROBE_STEPS = 64  # timed T_t(1) steps in one probe record, at most
KNOWN = ("context_len", "target_ms", "draft_ms", "t1_ms", "rule_ms")


@dataclass(frozen=True)
class Probes(Extra):
    """{"context_len": n >= 0, "target_ms": [[n, ms], ...] with distinct n in 1..MAX_PASS,
    "draft_ms": ms, "t1_ms": [ms, ...] (every timed T_t(1) step), "rule_ms": ms}, times
    finite and >= 0. Each may be absent or null (a probe of T_t(1) alone has no draft_ms);
    `keys` keeps which were recorded, in order, and `other` any field of a newer version, so
    a probe is written back as it was read. An empty record ({}) is no probe (falsy)."""

    key = "probes"
    since = (1, 1)

    context_len: int | None = None
    target_ms: tuple[tuple[int, float | None], ...] | None = None  # T_t(n): (n, median ms)
    draft_ms: float | None = None  # T_d(1)
    t1_ms: tuple[float, ...] | None = None  # every timed T_t(1) step
    rule_ms: float | None = None  # the verification rule's own cost
    keys: tuple[str, ...] = ()  # the fields recorded, in order
    other: Mapping[str, Any] = field(default_factory=dict)  # fields this version does not know

    def __bool__(self) -> bool:
        return bool(self.keys)

    def recorded(self, name: str) -> bool:
        """Whether the record holds the field (null included)."""
        return name in self.keys

    @classmethod
    def from_json(cls, value: dict[str, Any], line: int | None) -> Probes:
        context = get_field(value, "context_len", int, line, optional=True, prefix="probes.")
        if context is not None and context < 0:
            raise TraceError(f"{context}: negative", line, "probes.context_len")
        draft = _ms(value.get("draft_ms"), line, "probes.draft_ms")
        pairs = get_field(value, "target_ms", list, line, optional=True, prefix="probes.")
        target = None if pairs is None else _pairs(pairs, line)
        steps = get_field(value, "t1_ms", list, line, optional=True, prefix="probes.")
        if steps is not None:
            if len(steps) > MAX_PROBE_STEPS:
                raise TraceError(
                    f"{len(steps)} steps, more than {MAX_PROBE_STEPS}", line, "probes.t1_ms"
                )
            steps = tuple(_ms(ms, line, f"probes.t1_ms[{i}]") for i, ms in enumerate(steps))
            if None in steps:
                raise TraceError("expected a time, got null", line, "probes.t1_ms")
        rule = _ms(value.get("rule_ms"), line, "probes.rule_ms")
        other = {k: v for k, v in value.items() if k not in KNOWN}
        return cls(context, target, draft, steps, rule, tuple(value), other)

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> Probes:
        """The engine's record (core.engine.cost_probes), its numbers as timed."""
        target = value.get("target_ms")
        steps = value.get("t1_ms")
        return cls(
            value.get("context_len"),
            None if target is None else tuple((n, ms) for n, ms in target),
            value.get("draft_ms"),
            None if steps is None else tuple(steps),
            value.get("rule_ms"),
            tuple(value),
            {k: v for k, v in value.items() if k not in KNOWN},
        )

    def to_json(self) -> dict[str, Any]:
        return {name: self._json(name) for name in self.keys}

    def _json(self, name: str) -> Any:
        if name not in KNOWN:
            return self.other[name]
        value = getattr(self, name)
        if name == "target_ms" and value is not None:
            return [[n, ms] for n, ms in value]
        if name == "t1_ms" and value is not None:
            return list(value)
        return value


def _pairs(pairs: list, line: int | None) -> tuple[tuple[int, float | None], ...]:
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
    return tuple((n, _ms(ms, line, f"probes.target_ms[{i}]")) for i, (n, ms) in enumerate(pairs))


def _ms(value: Any, line: int | None, name: str) -> float | None:
    if value is None:
        return None
    if type(value) not in (int, float):
        raise type_error(value, float, line, name)
    ms = as_float(value, line, name) if type(value) is int else value
    if not 0 <= ms < math.inf:
        raise TraceError(f"{ms}: not a time (finite, >= 0)", line, name)
    return ms
