"""The speedup lines of `specviz run` and `specviz inspect`, from a summary (metrics.running).

Every figure says what it is: the measured speedup and where its baseline comes from (the
cost model's probes over a window of rounds, or the header of a trace without probes), the
refined prediction beside Leviathan et al.'s, and a measured value above K + 1 flagged as
impossible rather than shown as a measurement.
"""

from __future__ import annotations

from typing import Any


def _f(value: float | None, fmt: str = "{:.2f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def measured(s: dict[str, Any]) -> str:
    """'measured 1.85x', or the impossible value flagged."""
    raw = s.get("speedup_measured_raw", s["speedup_measured"])
    if not s.get("speedup_impossible"):
        return f"measured {_f(s['speedup_measured'], '{:.2f}x')}"
    most = s["max_tokens_per_round"]
    return (
        f"measured {_f(raw, '{:.2f}x')} IMPOSSIBLE: above K + 1 = {most} tokens a round can "
        "emit (a slow baseline probe or a busy machine); not a measurement"
    )


def predicted(s: dict[str, Any]) -> str:
    """Both predictions, labelled."""
    refined = s.get("speedup_refined")
    why = "from the measured costs" if refined is not None else "needs the cost model's probes"
    return (
        f"predicted: refined {_f(refined, '{:.2f}x')} ({why})   Leviathan et al. "
        f"{_f(s['speedup_predicted'], '{:.2f}x')} (from alpha and c alone)"
    )


def basis(s: dict[str, Any]) -> str:
    """Where the baseline and c come from, and the rounds they cover."""
    window = s.get("window") or {}
    first, last = window.get("first_round"), window.get("last_round")
    rounds = "no rounds" if first is None else f"rounds {first}-{last}"
    base = f"target alone {_f(s['baseline_ms_per_token'])} ms/token"
    c = f"c = {_f(s['cost_ratio'], '{:.3f}')}"
    source = s.get("speedup_basis")
    if source == "probes":
        return (
            f"{base} (running median of {window.get('probes', 0)} probes of T_t(1)), {c}, "
            f"over {rounds}"
        )
    if source == "header":
        return (
            f"{base} (the header's, measured once at session start: the trace has no probes, "
            f"schema 1.0), {c}, over {rounds}"
        )
    return f"{base}, {c}: the session did not measure the step costs"
