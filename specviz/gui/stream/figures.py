"""Probabilities as people read them: one precision everywhere, and a comparison whose
printed figures order as the numbers do. GUI thread (plain functions)."""

from __future__ import annotations


def fmt(value: float | None, digits: int = 3) -> str:
    """A probability for people: `digits` decimals from 0.1 up, else `digits` significant
    ones, trailing zeros kept, so that p / q can be checked by hand when both are small
    (0.00466 / 0.00613) and 0.01 reads as precisely as its neighbours (0.0100)."""
    if value is None:
        return "n/a"
    if value == 0 or abs(value) >= 0.1:
        text = f"{value:.{digits}f}"
        while float(text) >= 1 > value and digits < 15:  # a draw u < 1 never reads "1.000"
            digits += 1
            text = f"{value:.{digits}f}"
        return text
    return f"{value:#.{digits}g}"


def fmt_pair(a: float | None, b: float | None, digits: int = 3) -> tuple[str, str]:
    """a and b for a comparison: digits added until they differ (never "0.760 < 0.760")."""
    if a is None or b is None:
        return fmt(a, digits), fmt(b, digits)
    while digits < 15 and a != b and fmt(a, digits) == fmt(b, digits):
        digits += 1
    return fmt(a, digits), fmt(b, digits)
