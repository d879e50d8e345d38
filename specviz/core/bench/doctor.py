"""An engine's acceptance figures in every engine's definitions, the shape of its curve
named with likely causes, and the K the cost model would pick (`specviz doctor`).

Definitions (d drafts = target passes that judged drafts, t draft tokens, a accepted, a_i
drafts whose position i was accepted; a_0 = d):

- acceptance length, bonus counted = 1 + a / d: vLLM's "mean acceptance length", SGLang's
  "accept len", Spec-Bench's #MAT, specviz's tokens per target pass;
- acceptance length without the bonus = a / d (EAGLE's and Medusa's papers count it so);
- acceptance rate = a / t: vLLM's "draft acceptance rate", llama.cpp's "accept",
  SGLang's "accept rate", specviz's "draft efficiency";
- per position, unconditional = a_i / d (vLLM's per-position acceptance rate);
  conditional = a_i / a_(i-1), the chance position i is accepted once every earlier one
  was (specviz's acceptance by position; Leviathan's alpha when the positions are alike).

The best K: the K in 1..(positions recorded) that maximises (1 + sum_{i<=K} a_i / d) /
(K c + 1), c = a draft step's cost / a target step's (Leviathan et al.'s model with the
measured per-position acceptance in place of alpha); c is given or measured by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.core.metrics.engine_metrics import EngineRecord

COLLAPSE = 0.1  # position 1 accepted less often than this: the draft does not fit the target
LOW = 0.35  # every position below this: a systematic mismatch
CLIFF = 0.5  # a position kept less than half as often as the one before: a cliff
MIN_REACH = 20  # drafts that reached a position before its conditional rate is judged


@dataclass(frozen=True)
class Finding:
    code: str  # position1-collapse | uniformly-low | cliff | healthy
    message: str


@dataclass(frozen=True)
class Diagnosis:
    record: EngineRecord
    acceptance_length: float | None  # bonus counted
    acceptance_length_no_bonus: float | None
    acceptance_rate: float | None
    per_position_unconditional: tuple[float, ...] | None
    per_position_conditional: tuple[float | None, ...] | None
    best_k: int | None
    best_speedup: float | None  # the predicted speedup at best_k
    cost_ratio: float | None
    findings: tuple[Finding, ...]

    def to_json(self) -> dict:
        r = self.record
        return {
            "engine": r.engine,
            "source": r.source,
            "drafts": r.drafts,
            "draft_tokens": r.draft_tokens,
            "accepted_tokens": r.accepted_tokens,
            "acceptance_length": self.acceptance_length,
            "acceptance_length_no_bonus": self.acceptance_length_no_bonus,
            "acceptance_rate": self.acceptance_rate,
            "per_position_unconditional": _list(self.per_position_unconditional),
            "per_position_conditional": _list(self.per_position_conditional),
            "k": r.k,
            "best_k": self.best_k,
            "best_k_speedup": self.best_speedup,
            "cost_ratio": self.cost_ratio,
            "findings": [{"code": f.code, "message": f.message} for f in self.findings],
            "intervals": r.intervals,
        }


def _list(values) -> list | None:
    return None if values is None else list(values)


def diagnose(record: EngineRecord, cost_ratio: float | None = None) -> Diagnosis:
    d, t, a = record.drafts, record.draft_tokens, record.accepted_tokens
    length = record.acceptance_length
    if length is None and d and a is not None:
        length = 1 + a / d
    rate = record.acceptance_rate
    if rate is None and t and a is not None:
        rate = a / t
    uncond = cond = None
    if record.accepted_per_pos and d:
        uncond = tuple(x / d for x in record.accepted_per_pos)
        reach = (d, *record.accepted_per_pos)
        cond = tuple(x / reach[i] if reach[i] > 0 else None
                     for i, x in enumerate(record.accepted_per_pos))  # fmt: skip
    best_k = best = None
    if uncond and cost_ratio is not None:
        best_k, best = best_k_for(uncond, cost_ratio)
    findings = _findings(record, rate, cond)
    return Diagnosis(
        record, length, None if length is None else length - 1, rate, uncond, cond, best_k,
        best, cost_ratio, tuple(findings),
    )  # fmt: skip


def best_k_for(unconditional, cost_ratio: float) -> tuple[int, float]:
    """(K, predicted speedup) maximising (1 + sum_{i<=K} u_i) / (K c + 1)."""
    best_k, best, expected = 1, -1.0, 1.0
    for k, u in enumerate(unconditional, 1):
        expected += u
        value = expected / (k * cost_ratio + 1)
        if value > best + 1e-12:
            best_k, best = k, value
    return best_k, best


def _findings(record: EngineRecord, rate, cond) -> list[Finding]:
    if cond:
        reach = (record.drafts, *record.accepted_per_pos)
        judged = [
            (i, c) for i, c in enumerate(cond, 1) if c is not None and reach[i - 1] >= MIN_REACH
        ]
    else:
        judged = []
    out = []
    if judged and judged[0][0] == 1 and judged[0][1] < COLLAPSE:
        out.append(Finding("position1-collapse", (
            f"acceptance at position 1 is {judged[0][1]:.3f}: the draft almost never agrees with "
            "the target on its first token. Likely a head trained on other layers or for another "
            "target (EAGLE-3: eagle_aux_hidden_state_layer_ids and the verifier named in its "
            "config must match the target served), or weights that did not load (check the "
            "engine's log for missing keys)."
        )))  # fmt: skip
        return out
    if judged:
        low = all(c < LOW for _, c in judged)
    else:
        low = rate is not None and rate < LOW
    if low:
        where = ("at every position" if judged else "overall (this record has no per-position "
                 "figures)")  # fmt: skip
        out.append(Finding("uniformly-low", (
            f"acceptance is below {LOW} {where}: a systematic mismatch rather than a bad "
            "position. Likely a missing vocabulary map (an EAGLE-3 head's d2t/t2d, a draft "
            "vocabulary unlike the target's), a tokenizer or chat template that differs between "
            "draft and target (or from what the head was trained on), or sampling settings "
            "unlike the draft's (a temperature or top-p the draft never saw)."
        )))  # fmt: skip
    cliff = _cliff(judged)
    if cliff is not None:
        k, before, after = cliff
        out.append(Finding("cliff", (
            f"a cliff after position {k}: {before:.3f} at position {k}, {after:.3f} at "
            f"{k + 1} (conditional). K is likely too large for this draft (positions past {k} "
            f"cost a draft step each and rarely pay): try K = {k}; a head trained for fewer "
            "steps than it is run (no training-time test) shows the same."
        )))  # fmt: skip
    if not out:
        tail = "" if judged else " (no per-position figures: the shape is not known)"
        out.append(Finding("healthy", (
            "no collapse, no cliff, acceptance not uniformly low: the curve looks like a draft "
            f"that fits its target{tail}."
        )))  # fmt: skip
    return out


def _cliff(judged) -> tuple[int, float, float] | None:
    """(k, conditional rate at k, at k + 1) of the first sharp drop after a good position."""
    for (i, before), (j, after) in zip(judged, judged[1:], strict=False):
        if j == i + 1 and before >= LOW and after < CLIFF * before:
            return i, before, after
    return None


def session_record(stats) -> EngineRecord | None:
    """A session's running stats (core.metrics.running.RunningStats) counted as vLLM counts
    them: drafts are the rounds that drafted, a_i the rounds whose position (a tree's depth)
    i was accepted; None before a round drafted anything."""
    drafts = stats.rounds - stats.undrafted
    if drafts <= 0:
        return None
    return EngineRecord("specviz", "session", drafts, stats.drafted, stats.accepted,
                        tuple(stats.by_position_accepted), intervals=stats.rounds)  # fmt: skip
