"""What a suffix-decoding proposal matched (schema 1.6; core.drafters.suffix)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from specviz.core.trace.extras.base import Extra
from specviz.core.trace.records import MAX_TREE_BUDGET, Round, TraceError

SOURCES = ("request", "cache")
CUTS = ("k", "spec_factor", "min_prob", "eos", "end", "policy")
_FIELDS = ("source", "length", "count", "probs", "cut")


@dataclass(frozen=True)
class SuffixMatch(Extra):
    """{"source": "request" (this prompt and output) or "cache" (earlier outputs), "length":
    the matched suffix's tokens (the context's last ones), "count": its earlier occurrences
    with a continuation, "probs": each drafted token's (node's) probability, the share of
    those occurrences that continued so, and on a chain "cut": why it ended (CUTS)}."""

    key = "matched"
    since = (1, 6)

    source: str
    length: int
    count: int
    probs: tuple[float, ...]  # as recorded (an integer 0 or 1 stays one)
    cut: str | None = None
    # the fields in the order recorded, so a match is written back as it was read
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_json(cls, value: dict[str, Any], line: int | None) -> SuffixMatch:
        if not set(value) <= set(_FIELDS) or not set(_FIELDS[:4]) <= set(value):
            raise TraceError(f"expected the fields {', '.join(sorted(_FIELDS))}", line, "matched")
        if value["source"] not in SOURCES:
            raise TraceError(f"source must be one of {', '.join(SOURCES)}", line, "matched")
        for name in ("length", "count"):
            if type(value[name]) is not int or value[name] < 1:
                raise TraceError(f"{name} must be a positive integer", line, "matched")
        probs = value["probs"]
        if (type(probs) is not list or len(probs) > MAX_TREE_BUDGET
                or not all(type(x) in (int, float) and 0 <= x <= 1 for x in probs)):  # fmt: skip
            raise TraceError("probs must be numbers in [0, 1]", line, "matched")
        if "cut" in value and value["cut"] not in CUTS:
            raise TraceError(f"cut must be one of {', '.join(CUTS)}", line, "matched")
        return cls.from_value(value)

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> SuffixMatch:
        return cls(value["source"], value["length"], value["count"], tuple(value["probs"]),
                   value.get("cut"), tuple(value))  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        obj = {"source": self.source, "length": self.length, "count": self.count,
               "probs": list(self.probs)}  # fmt: skip
        if self.cut is not None:
            obj["cut"] = self.cut
        return {key: obj[key] for key in self.order} if self.order else obj

    def span(self, context_len: int) -> tuple[int, int]:
        """[start, end): the context positions the match covers (its last tokens)."""
        return context_len - self.length, context_len

    def round_note(self, rnd: Round) -> str:
        where = "this request" if self.source == "request" else "earlier outputs"
        return f"suffix match: the last {self.length} tokens (blue), seen {self.count}x in {where}"

    def token_note(self, rnd: Round, index: int, fmt: Callable[[float], str]) -> str:
        probs = self.probs if rnd.tree is None else ()  # a tree's are by node
        p_path = f"; this path's probability {fmt(probs[index])}" if index < len(probs) else ""
        return f"{self.round_note(rnd)}{p_path}: q is one-hot, accepted with probability p"

    def context_span(self, rnd: Round) -> tuple[int, int]:
        return self.span(rnd.context_len)
