"""A block round's numbers (schema 1.3, settings.verifier "block"; the rule is
core.decoding.block, Sun et al.): at each drafted position i the block's weight p_i, its
acceptance chance h_i and its draw u_i. The round keeps the largest prefix with u_i < h_i.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specviz.core.trace.extras.base import JUDGED, Extra, Found, PositionTest
from specviz.core.trace.records import (
    MAX_K,
    Round,
    SessionHeader,
    Settings,
    TokenEvent,
    TraceError,
)


def unit_lists(value: dict[str, Any], keys: tuple[str, ...], line: int | None, rule: str) -> dict:
    """{key: [floats in [0, 1]]}, each list at most MAX_K long, all of one length."""
    out = {}
    for key in keys:
        numbers = value.get(key)
        name = f"{rule}.{key}"
        if type(numbers) is not list or len(numbers) > MAX_K:
            raise TraceError(f"expected a list of at most {MAX_K} numbers", line, name)
        for i, v in enumerate(numbers):
            if type(v) not in (int, float) or not 0 <= v <= 1:
                raise TraceError(f"{v!r}: not a number in [0, 1]", line, f"{name}[{i}]")
        out[key] = tuple(float(v) for v in numbers)
    if len({len(v) for v in out.values()}) != 1:
        raise TraceError(f"{', '.join(keys)} must have one entry per position", line, rule)
    return out


@dataclass(frozen=True)
class BlockNumbers(Extra):
    """{"weights": [p_i], "h": [h_i], "u": [u_i]}, one number in [0, 1] per drafted position;
    the round's tokens' statuses are the block's."""

    key = "block"
    since = (1, 3)

    weights: tuple[float, ...]  # p_i = min(1, p_{i-1} p(x_i) / q(x_i)), p_0 = 1
    h: tuple[float, ...]  # the chance the block keeps position i
    u: tuple[float, ...]  # the draw held against h_i

    @classmethod
    def from_json(cls, value: dict[str, Any], line: int | None) -> BlockNumbers:
        return cls(**unit_lists(value, ("weights", "h", "u"), line, "block"))

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> BlockNumbers:
        return cls(tuple(value["weights"]), tuple(value["h"]), tuple(value["u"]))

    def to_json(self) -> dict[str, list[float]]:
        return {"weights": list(self.weights), "h": list(self.h), "u": list(self.u)}

    def at(self, position: int) -> tuple[float, float, float] | None:
        """The accept test at a drafted position, as the distribution panel shows it:
        (p_i, h_i, u_i), kept while u_i < h_i; None past the block."""
        if not 0 <= position < len(self.u):
            return None
        return self.weights[position], self.h[position], self.u[position]

    def position_test(
        self, rnd: Round, position: int, drafted: TokenEvent | None
    ) -> PositionTest | None:
        numbers = self.at(position)
        if numbers is None:
            return None
        _, h, u = numbers
        why = "judged as a block (Sun et al.): kept up to the last position whose u < h"
        return PositionTest("u vs h_i", u, h, u < h, False, "u", "h", why)

    @classmethod
    def check(cls, rnd: Round, settings: Settings, header: SessionHeader) -> Found:
        """A block round's numbers cover the drafted tokens, the kept prefix is the largest
        i with u_i < h_i, the judged tokens' draws are the block's, and the weights follow
        p_i = min(1, p_{i-1} p(x_i) / q(x_i)) over them."""
        block = rnd.block
        if settings.verifier != "block" and block is None:
            return
        if rnd.settings is not None and rnd.settings.verifier != "block":
            yield "block", "block numbers in a round not verified as a block"
            return
        if block is None:
            if rnd.n_drafted:
                yield "block", "a block round without its block numbers"
            return
        weights, h, u = block.weights, block.h, block.u
        if len(u) != rnd.n_drafted:
            yield "block", f"{len(u)} positions for {rnd.n_drafted} drafted tokens"
            return
        tau = max((i + 1 for i in range(len(u)) if u[i] < h[i]), default=0)
        if tau != rnd.n_accepted:
            kept = f"the block keeps {tau} drafts (the last u_i < h_i), not {rnd.n_accepted}"
            yield "block.u", kept
        running = 1.0
        for i, t in enumerate(t for t in rnd.tokens if t.status in JUDGED):
            if t.u is not None and t.u != u[i]:
                yield f"block.u[{i}]", f"{u[i]!r}, but the token's draw is {t.u!r}"
            if t.p is not None and t.q is not None and t.q > 0:
                running = min(1.0, running * t.p / t.q)
                if abs(running - weights[i]) > 1e-6 * max(running, 1e-12) + 1e-12:
                    yield f"block.weights[{i}]", f"{weights[i]!r}, but p_i = {running!r}"
