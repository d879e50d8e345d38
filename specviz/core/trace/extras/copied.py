"""Where a prompt-lookup proposal was copied from (schema 1.1; core.drafters.lookup)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specviz.core.trace.extras.base import Extra
from specviz.core.trace.records import Round, TraceError


@dataclass(frozen=True)
class CopiedFrom(Extra):
    """[start, end): the context positions the round's drafts were copied from."""

    key = "copied_from"
    since = (1, 1)
    json_type = list

    start: int
    end: int

    @property
    def span(self) -> tuple[int, int]:
        return self.start, self.end

    def __iter__(self):  # start, end = rnd.copied_from
        return iter(self.span)

    @classmethod
    def from_json(cls, value: list, line: int | None) -> CopiedFrom:
        if len(value) != 2 or not set(map(type, value)) <= {int} or not 0 <= value[0] <= value[1]:
            raise TraceError("expected [start, end] positions", line, "copied_from")
        return cls(value[0], value[1])

    @classmethod
    def from_value(cls, value: Any) -> CopiedFrom:
        start, end = value
        return cls(start, end)

    def to_json(self) -> list[int]:
        return [self.start, self.end]

    def round_note(self, rnd: Round) -> str:
        return f"copied from context [{self.start}, {self.end})"

    def token_note(self, rnd: Round, index: int, fmt: Callable[[float], str]) -> str:
        return (
            f"copied by prompt lookup from context [{self.start}, {self.end}) (blue when "
            "selected): q is one-hot, so it is accepted with probability p"
        )

    def context_span(self, rnd: Round) -> tuple[int, int]:
        return self.span
