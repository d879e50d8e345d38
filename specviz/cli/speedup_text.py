"""The speedup lines of `specviz run` and `specviz inspect`, from a summary (metrics.running).

Every figure says what it is: the measured speedup and where its baseline comes from (the
cost model's probes over a window of rounds, or the header of a trace without probes), the
refined prediction beside Leviathan et al.'s, and a value that is no measurement (too few
baseline steps, an interval too wide, above the tokens per target pass) said to be so.
"""

from __future__ import annotations

from typing import Any


def _f(value: float | None, fmt: str = "{:.2f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def measured(s: dict[str, Any]) -> str:
    """'measured 1.85x [1.71, 1.98] (95%)', or why there is no figure (core.metrics.speedup):
    still measuring the baseline, too noisy to tell, or impossible."""
    status = s.get("speedup_status")
    raw = s.get("speedup_measured_raw", s["speedup_measured"])
    ci = s.get("speedup_ci")
    band = f" [{ci[0]:.2f}, {ci[1]:.2f}] (95%)" if ci else ""
    if status == "measuring":
        steps = (s.get("window") or {}).get("baseline_steps", 0)
        return f"measured n/a: measuring the baseline ({steps} decoding steps so far: too few)"
    if status == "noisy":
        return f"measured {_f(raw, '{:.2f}x')}{band}: too noisy to tell (the interval holds 1)"
    if status == "impossible" or s.get("speedup_impossible"):
        bound = s.get("speedup_bound")
        return (
            f"measured {_f(raw, '{:.2f}x')} IMPOSSIBLE: above {_f(bound)} (the tokens per "
            "target pass, plus 15%): a slow baseline probe or a busy machine; not a measurement"
        )
    if status == "calibration":
        return f"measured {_f(s['speedup_measured'], '{:.2f}x')} (no interval: see below)"
    verdict = s.get("speedup_verdict")
    said = f": {verdict}" if verdict else ""
    return f"measured {_f(s['speedup_measured'], '{:.2f}x')}{band}{said}"


def predicted(s: dict[str, Any]) -> str:
    """Both predictions, labelled."""
    refined = s.get("speedup_refined")
    why = "from the probes' costs" if refined is not None else "needs the cost model's probes"
    band = s.get("speedup_refined_ci")
    spread = f" [{band[0]:.2f}, {band[1]:.2f}]" if band and refined is not None else ""
    ratio = s.get("refined_ratio")
    check = "" if ratio is None else f", measured/refined {ratio:.2f}"
    return (
        f"predicted: refined {_f(refined, '{:.2f}x')}{spread} ({why}{check})   Leviathan et al. "
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
            f"{base} (median of {window.get('baseline_steps', 0)} decoding steps timed by "
            f"{window.get('probes', 0)} probes), {c}, over {rounds}"
        )
    if source == "header":
        return (
            f"{base} (the header's, measured once at session start: the trace has no probes, "
            f"schema 1.0), {c}, over {rounds}"
        )
    return f"{base}, {c}: the session did not measure the step costs"
