"""A lenient round's numbers (settings.verifier "lenient", LOSSY for l < 1; the rule is
core.decoding.lenient, Leviathan et al.'s lenience): the lenience l and, per judged
position, the test min(1, p(x) / (l q(x))) its draw u was held against.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specviz.core.trace.extras.base import Extra, Found, PositionTest, rule_round
from specviz.core.trace.extras.block import unit_lists
from specviz.core.trace.records import Round, SessionHeader, Settings, TokenEvent, TraceError

TOLERANCE = 1e-6  # a recorded min(1, p/(l q)) against the one its token's p, q give


@dataclass(frozen=True)
class LenientNumbers(Extra):
    """{"lenience": l, "accept": [min(1, p/(l q))]}, l in (0, 1], one test per judged token."""

    key = "lenient"
    since = (1, 10)

    lenience: float
    accept: tuple[float, ...]

    @classmethod
    def from_json(cls, value: dict[str, Any], line: int | None) -> LenientNumbers:
        lenience = value.get("lenience")
        if type(lenience) not in (int, float) or not 0 < lenience <= 1:
            raise TraceError(f"{lenience!r}: not a lenience in (0, 1]", line, "lenient.lenience")
        return cls(float(lenience), unit_lists(value, ("accept",), line, "lenient")["accept"])

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> LenientNumbers:
        return cls(float(value["lenience"]), tuple(value["accept"]))

    def to_json(self) -> dict[str, Any]:
        return {"lenience": self.lenience, "accept": list(self.accept)}

    def round_note(self, rnd: Round) -> str | None:
        return f"lenient, l = {self.lenience:g} (LOSSY)" if self.lenience < 1 else None

    def position_test(
        self, rnd: Round, position: int, drafted: TokenEvent | None
    ) -> PositionTest | None:
        if not 0 <= position < len(self.accept) or drafted is None or drafted.u is None:
            return None
        line, u = self.accept[position], drafted.u
        lossy = " (LOSSY)" if self.lenience < 1 else ""
        why = f"judged by the lenient rule{lossy}, l = {self.lenience:g}: kept when u < it"
        return PositionTest("u vs min(1, p/(l q))", u, line, u < line, False, "u", "", why)

    @classmethod
    def check(cls, rnd: Round, settings: Settings, header: SessionHeader) -> Found:
        """One test per judged token, each min(1, p/(l q)) of its token, u below it exactly
        when the token was kept."""
        numbers = rnd.extras.get(cls.key)
        problems, judged = rule_round(rnd, settings, "lenient", numbers, "numbers")
        yield from problems
        if judged is None:
            return
        if len(numbers.accept) != len(judged):
            yield "lenient", f"{len(numbers.accept)} tests for {len(judged)} judged tokens"
            return
        for i, t in enumerate(judged):
            a = numbers.accept[i]
            if t.p is not None and t.q:
                want = min(1.0, t.p / (numbers.lenience * t.q))
                if abs(a - want) > TOLERANCE:
                    yield f"lenient.accept[{i}]", f"{a!r}, but min(1, p/(l q)) is {want!r}"
            if t.u is not None and (t.u < a) != (t.status == "accepted"):
                yield f"lenient.accept[{i}]", f"u {t.u!r} against {a!r}, but '{t.status}'"
