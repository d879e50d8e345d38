"""A typical round's thresholds (schema 1.4, settings.verifier "typical", LOSSY; the rule is
core.decoding.typical, Medusa's typical acceptance): a drafted token is kept while its p
exceeds its position's threshold min(epsilon, delta exp(-H(p))).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specviz.core.trace.extras.base import Extra, Found, PositionTest, rule_round
from specviz.core.trace.extras.block import unit_lists
from specviz.core.trace.records import Round, SessionHeader, Settings, TokenEvent


@dataclass(frozen=True)
class TypicalThresholds(Extra):
    """{"threshold": [min(epsilon, delta exp(-H))]}, one number in [0, 1] per judged position."""

    key = "typical"
    since = (1, 4)

    threshold: tuple[float, ...]

    @classmethod
    def from_json(cls, value: dict[str, Any], line: int | None) -> TypicalThresholds:
        return cls(**unit_lists(value, ("threshold",), line, "typical"))

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> TypicalThresholds:
        return cls(tuple(value["threshold"]))

    def to_json(self) -> dict[str, list[float]]:
        return {"threshold": list(self.threshold)}

    def at(self, position: int) -> float | None:
        """The accept test at a judged position, as the distribution panel shows it: the
        threshold the drafted token's p was held against; None past the judged ones."""
        return self.threshold[position] if 0 <= position < len(self.threshold) else None

    def position_test(
        self, rnd: Round, position: int, drafted: TokenEvent | None
    ) -> PositionTest | None:
        threshold = self.at(position)
        if threshold is None or drafted is None or drafted.p is None:
            return None
        p = drafted.p
        why = "judged by typical acceptance (Medusa, LOSSY): kept while p > its threshold"
        return PositionTest("p vs threshold", p, threshold, p > threshold, True, "p", "", why)

    @classmethod
    def check(cls, rnd: Round, settings: Settings, header: SessionHeader) -> Found:
        """One threshold per judged token, an accepted token's p above its threshold and a
        rejected one's not."""
        typical = rnd.typical
        problems, judged = rule_round(rnd, settings, "typical", typical, "thresholds")
        yield from problems
        if judged is None:
            return
        threshold = typical.threshold
        if len(threshold) != len(judged):
            yield "typical", f"{len(threshold)} thresholds for {len(judged)} judged tokens"
            return
        for i, t in enumerate(judged):
            if t.p is None:
                continue  # named by the token's own checks
            kept = t.p > threshold[i]
            if kept != (t.status == "accepted"):
                relation = ">" if t.p > threshold[i] else "<="
                yield (
                    f"typical.threshold[{i}]",
                    f"p {t.p!r} {relation} threshold {threshold[i]!r}, but the token is "
                    f"'{t.status}'",
                )
