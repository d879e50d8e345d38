"""Engines' own records of speculative decoding, read into one set of counters
(`specviz doctor`; the figures and findings: core.bench.doctor).

- vLLM's /metrics (Prometheus text): the counters `vllm:spec_decode_num_drafts`,
  `..._num_draft_tokens`, `..._num_accepted_tokens` and `..._num_accepted_tokens_per_pos`
  (label `position`, 0-based), each with the `_total` suffix /metrics gives counters and
  labels such as `model_name` and `engine`; every label set is summed (several engines).
- vLLM's log: "SpecDecoding metrics: Mean acceptance length: L, ..., Accepted: A tokens,
  Drafted: D tokens, Per-position acceptance rate: r1, r2, ..., Avg Draft acceptance rate:
  x%" a logging interval each (vllm/v1/spec_decode/metrics.py); the intervals are summed,
  each interval's drafts taken as D / K (K: the number of per-position rates; vLLM drafts K
  a step) and its per-position counts as r_i x drafts.
- SGLang's server log: "Decode batch ..., accept len: L[, accept rate: r], ..." a logging
  interval each (scheduler's log_decode_stats): L counts the bonus (accepted tokens /
  verify passes); intervals are averaged, unweighted (the log gives no counts).
- llama.cpp: the end-of-run statistics of llama-speculative ("n_draft = K", "n_predict = N",
  "n_drafted = D", "n_accept = A"), summed over runs, the drafts taken as N - A (a round
  emits its accepted drafts and one target token); and llama-server's per-request "draft
  acceptance rate = r (A accepted / D generated)", summed.

Nothing here trusts the numbers: negative, NaN or infinite counters, accepted above
drafted, or per-position counts that rise with the position are refused (EngineRecordError,
one line naming what is wrong). Input is text already bounded by the caller.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass

MAX_LINE = 64 << 10  # a log line longer than this is cut (no engine writes one so long)


class EngineRecordError(ValueError):
    """Text that is no engine record we read, or whose numbers contradict themselves."""


@dataclass(frozen=True)
class EngineRecord:
    """Counters of speculative decoding as one engine recorded them (None: not recorded)."""

    engine: str  # "vllm", "sglang" or "llama.cpp"
    source: str  # "metrics", "log", "server-log", "end-of-run"
    drafts: float | None  # target verification passes that judged drafts
    draft_tokens: float | None
    accepted_tokens: float | None
    accepted_per_pos: tuple[float, ...] | None  # drafts whose position i+1 was accepted
    k: int | None = None  # drafts proposed per step, where the record says
    acceptance_length: float | None = None  # as given (SGLang), the bonus counted
    acceptance_rate: float | None = None  # as given (SGLang), accepted / drafted
    intervals: int = 1  # log lines or runs summed


_PROM = re.compile(
    r"^(vllm:spec_decode_num_(?:drafts|draft_tokens|accepted_tokens_per_pos|accepted_tokens))"
    r"(?:_total)?(\{[^}]*\})?\s+(\S+)"
)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_NUM = r"([-+]?(?:nan|inf|[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?))"
_VLLM_LOG = re.compile(
    r"SpecDecoding metrics:.*?Mean acceptance length:\s*" + _NUM
    + r".*?Accepted:\s*" + _NUM + r"\s*tokens,\s*Drafted:\s*" + _NUM
    + r"\s*tokens(?:,\s*Per-position acceptance rate:\s*([-+0-9.,eE\snaif]*?))?"
    r"(?:,\s*Avg Draft acceptance rate|$)",
    re.IGNORECASE,
)  # fmt: skip
_SGLANG = re.compile(
    r"Decode batch.*?accept len:\s*" + _NUM + r"(?:,\s*accept rate:\s*" + _NUM + ")?"
)
_LLAMA_KEY = re.compile(r"(?:^|\s)(n_draft|n_predict|n_drafted|n_accept)\s*=\s*" + _NUM + r"\s*$")
_LLAMA_SERVER = re.compile(
    r"draft acceptance rate\s*=\s*" + _NUM + r"\s*\(\s*" + _NUM + r"\s*accepted\s*/\s*" + _NUM
    + r"\s*generated\s*\)"
)  # fmt: skip


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise EngineRecordError(f"{what}: {text!r} is not a number") from None
    if math.isnan(value) or math.isinf(value):
        raise EngineRecordError(f"{what} is {text}: not a count")
    if value < 0:
        raise EngineRecordError(f"{what} is negative ({text})")
    return value


def read_record(text: str) -> EngineRecord:
    """The engine record in `text` (found by its lines); EngineRecordError if none is."""
    lines = [line[:MAX_LINE] for line in text.splitlines()]
    for reader in (_prometheus, _vllm_log, _llama_cpp, _llama_server, _sglang):
        record = reader(lines)
        if record is not None:
            return check(record)
    raise EngineRecordError(
        "found no speculative-decoding record: expected vLLM's /metrics "
        "(vllm:spec_decode_num_drafts_total ...), vLLM's 'SpecDecoding metrics:' log lines, "
        "SGLang's 'Decode batch ... accept len:' log lines or llama.cpp's "
        "n_drafted / n_accept statistics"
    )


def _prometheus(lines: list[str]) -> EngineRecord | None:
    totals: dict[str, float] = defaultdict(float)
    per_pos: dict[int, float] = defaultdict(float)
    found = False
    for number, line in enumerate(lines, 1):
        match = _PROM.match(line.strip())
        if match is None:
            continue
        found = True
        name, labels, value = match[1], dict(_LABEL.findall(match[2] or "")), match[3]
        value = _number(value, f"line {number}: {name}")
        if name.endswith("_per_pos"):
            try:
                position = int(labels.get("position", ""))
            except ValueError:
                raise EngineRecordError(f"line {number}: {name} without a position label") from None
            if not 0 <= position < 1024:
                raise EngineRecordError(f"line {number}: position {position} out of range")
            per_pos[position] += value
        else:
            totals[name.rsplit("num_", 1)[1]] += value
    if not found:
        return None
    missing = [n for n in ("drafts", "draft_tokens", "accepted_tokens") if n not in totals]
    if missing:
        raise EngineRecordError(
            "vLLM metrics without " + ", ".join(f"vllm:spec_decode_num_{n}_total" for n in missing)
        )
    pos = None
    if per_pos:
        k = max(per_pos) + 1
        pos = tuple(per_pos.get(i, 0.0) for i in range(k))
    return EngineRecord(
        "vllm", "metrics", totals["drafts"], totals["draft_tokens"], totals["accepted_tokens"],
        pos, k=len(pos) if pos else None,
    )  # fmt: skip


def _vllm_log(lines: list[str]) -> EngineRecord | None:
    drafts = drafted = accepted = 0.0
    per_pos: list[float] = []
    n = 0
    k_seen: int | None = None
    for number, line in enumerate(lines, 1):
        if "SpecDecoding metrics" not in line:
            continue
        match = _VLLM_LOG.search(line)
        if match is None:
            raise EngineRecordError(f"line {number}: a 'SpecDecoding metrics' line we cannot read")
        where = f"line {number}"
        length = _number(match[1], f"{where}: mean acceptance length")
        a = _number(match[2], f"{where}: accepted")
        d = _number(match[3], f"{where}: drafted")
        rates = [_number(r, f"{where}: a per-position rate") for r in _split(match[4])]
        if not rates:
            raise EngineRecordError(f"{where}: no per-position acceptance rates")
        if k_seen is not None and len(rates) != k_seen:
            raise EngineRecordError(f"{where}: {len(rates)} positions, earlier lines {k_seen}")
        k_seen = len(rates)
        line_drafts = d / len(rates)
        if a > 0 and length > 1 and abs((1 + a / line_drafts) - length) > 0.01 + 0.02 * length:
            raise EngineRecordError(
                f"{where}: inconsistent: mean acceptance length {length:g}, but 1 + accepted / "
                f"(drafted / K) = {1 + a / line_drafts:.2f}"
            )
        drafts, drafted, accepted, n = drafts + line_drafts, drafted + d, accepted + a, n + 1
        per_pos = [x + r * line_drafts for x, r in zip(per_pos or [0.0] * len(rates), rates,
                                                       strict=True)]  # fmt: skip
    if n == 0:
        return None
    return EngineRecord("vllm", "log", drafts, drafted, accepted, tuple(per_pos), k=k_seen,
                        intervals=n)  # fmt: skip


def _split(text: str | None) -> list[str]:
    return [t for t in (p.strip() for p in (text or "").split(",")) if t]


def _sglang(lines: list[str]) -> EngineRecord | None:
    lengths, rates = [], []
    for number, line in enumerate(lines, 1):
        match = _SGLANG.search(line)
        if match is None:
            continue
        length = _number(match[1], f"line {number}: accept len")
        if length == 0:  # an interval with no speculative step (spec off in that batch)
            continue
        if length < 1:
            raise EngineRecordError(
                f"line {number}: accept len {length:g} is below 1 (SGLang counts the bonus)"
            )
        lengths.append(length)
        if match[2] is not None:
            rate = _number(match[2], f"line {number}: accept rate")
            if rate > 1:
                raise EngineRecordError(f"line {number}: accept rate {rate:g} is above 1")
            rates.append(rate)
    if not lengths:
        return None
    length = sum(lengths) / len(lengths)
    rate = sum(rates) / len(rates) if rates else None
    k = round((length - 1) / rate) if rate else None
    return EngineRecord("sglang", "server-log", None, None, None, None, k=k or None,
                        acceptance_length=length, acceptance_rate=rate,
                        intervals=len(lengths))  # fmt: skip


def _llama_cpp(lines: list[str]) -> EngineRecord | None:
    runs: list[dict[str, float]] = []
    current: dict[str, float] = {}
    for number, line in enumerate(lines, 1):
        match = _LLAMA_KEY.search(line)
        if match is None:
            continue
        key = match[1]
        if key in current and key != "n_draft":  # the next run's statistics
            runs.append(current)
            current = {}
        current[key] = _number(match[2], f"line {number}: {key}")
    if current:
        runs.append(current)
    runs = [r for r in runs if "n_drafted" in r and "n_accept" in r]
    if not runs:
        return None
    drafted = sum(r["n_drafted"] for r in runs)
    accepted = sum(r["n_accept"] for r in runs)
    drafts = None
    if all("n_predict" in r for r in runs):
        drafts = sum(r["n_predict"] - r["n_accept"] for r in runs)
        if drafts <= 0:
            raise EngineRecordError("inconsistent: n_accept is not below n_predict")
    ks = {int(r["n_draft"]) for r in runs if "n_draft" in r}
    return EngineRecord("llama.cpp", "end-of-run", drafts, drafted, accepted, None,
                        k=ks.pop() if len(ks) == 1 else None, intervals=len(runs))  # fmt: skip


def _llama_server(lines: list[str]) -> EngineRecord | None:
    drafted = accepted = 0.0
    n = 0
    for number, line in enumerate(lines, 1):
        match = _LLAMA_SERVER.search(line)
        if match is None:
            continue
        accepted += _number(match[2], f"line {number}: accepted")
        drafted += _number(match[3], f"line {number}: generated")
        n += 1
    if n == 0:
        return None
    return EngineRecord("llama.cpp", "server-log", None, drafted, accepted, None, intervals=n)


def check(record: EngineRecord) -> EngineRecord:
    """The record if its counters agree with one another; EngineRecordError otherwise."""
    d, t, a = record.drafts, record.draft_tokens, record.accepted_tokens
    if t is not None and a is not None and a > t:
        raise EngineRecordError(
            f"inconsistent counters: {a:g} accepted tokens but only {t:g} drafted"
        )
    if record.engine == "vllm" and d is not None and t is not None and d > t:
        raise EngineRecordError(f"inconsistent counters: {d:g} drafts but {t:g} draft tokens")
    if d is not None and t is not None and d == 0 and t > 0:
        raise EngineRecordError(f"inconsistent counters: {t:g} draft tokens but no draft")
    pos = record.accepted_per_pos
    if pos:
        tol = 1e-6 + 0.005 * (d or 0)  # a log's rates are rounded to 3 places
        if d is not None and pos[0] > d + tol:
            raise EngineRecordError(
                f"inconsistent counters: position 1 accepted {pos[0]:g} times in {d:g} drafts"
            )
        for i in range(1, len(pos)):
            if pos[i] > pos[i - 1] + tol:
                raise EngineRecordError(
                    f"inconsistent counters: position {i + 1} accepted more often ({pos[i]:g}) "
                    f"than position {i} ({pos[i - 1]:g}); a draft reaches i + 1 only past i"
                )
        if a is not None and abs(sum(pos) - a) > tol * len(pos) + 1e-6 * a + 0.5:
            raise EngineRecordError(
                f"inconsistent counters: the per-position counts sum to {sum(pos):g}, "
                f"accepted tokens are {a:g}"
            )
    if d is not None and a is not None and record.k and d > 0 and a / d > record.k + 1e-6:
        raise EngineRecordError(
            f"inconsistent counters: {a / d:.2f} accepted per draft with K = {record.k}"
        )
    return record
