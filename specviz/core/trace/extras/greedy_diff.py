"""Where a greedy half-precision session's text first leaves the target alone's greedy
decoding (schema 1.6; core.decoding.greedy_check), found in this round, and that in words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specviz.core.trace.extras.base import Extra
from specviz.core.trace.records import TraceError

# Its fields and their JSON types, in the order written; pass_tokens may be absent.
FIELDS = {"position": int, "ours": int, "theirs": int, "text_ours": str,
          "text_theirs": str, "logit_ours": float, "logit_theirs": float,
          "pass_tokens": int}  # fmt: skip
NEAR_TIE = 0.25  # logits closer than this: a rounding apart (bf16 keeps ~3 digits of a logit)


@dataclass(frozen=True)
class GreedyDiff(Extra):
    """The first generated token where the text differs from the target alone's, both
    tokens, the target's logits for them, and the pass's size there."""

    key = "greedy_diff"
    since = (1, 6)

    position: int  # 0-based among the generated tokens
    ours: int  # the session's token
    theirs: int  # the target alone's greedy token
    text_ours: str
    text_theirs: str
    logit_ours: float
    logit_theirs: float
    pass_tokens: int | None = None  # the tokens of the target pass that emitted it

    @classmethod
    def from_json(cls, value: dict[str, Any], line: int | None) -> GreedyDiff:
        out: dict[str, Any] = {}
        for key, kind in FIELDS.items():
            v = value.get(key)
            if v is None and key == "pass_tokens":
                continue
            ok = type(v) is kind or kind is float and type(v) is int
            if not ok or kind is not str and v != v:  # NaN is no logit
                raise TraceError(f"expected {kind.__name__}", line, f"greedy_diff.{key}")
            out[key] = float(v) if kind is float else v
        return cls(**out)

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> GreedyDiff:
        """The engine's record (core.decoding.greedy_check.GreedyWatch.check)."""
        return cls(**{key: value[key] for key in FIELDS if value.get(key) is not None})

    def to_json(self) -> dict[str, Any]:
        obj = {key: getattr(self, key) for key in FIELDS}
        if self.pass_tokens is None:
            del obj["pass_tokens"]
        return obj

    def text(self, dtype: str | None = None) -> str:
        """In words: where the text left the target alone's, the two tokens, the target's
        logit margin there and why a near-tie can flip."""
        margin = self.logit_theirs - self.logit_ours
        tie = "an exact tie" if margin == 0 else "a near-tie" if margin < NEAR_TIE else "not a tie"
        n = self.pass_tokens
        why = (
            f"a pass of {n} tokens rounds differently from a pass of 1"
            if n and n > 1
            else "the pass was of 1 token: the rounding of earlier passes, kept in the cache"
        )
        where = f" in {dtype}" if dtype else ""
        return (
            f"the text leaves the target alone's greedy decoding{where} at generated token "
            f"{self.position + 1}: {tie}: {margin:.3g} between {self.text_theirs!r} (the "
            f"target alone) and {self.text_ours!r} (this session); {why}"
        )
