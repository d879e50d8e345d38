"""Session, Round and TokenEvent records and their JSON Lines form, schema "specviz.trace/1.1".

A trace is one JSON object per line: the session header, one line per round, and an
optional summary. Records are frozen: they cross from the worker thread to the GUI.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import orjson

from .checks import check_sampling

SCHEMA = "specviz.trace/1.1"
SCHEMA_MAJOR = 1
SCHEMA_MINOR = 1  # 1.1 added optional fields only: k, stop, events_ms, probes, copied_from,
# drafter, policy; a 1.0 trace reads as a 1.1 trace without them
# Why a round's drafting stopped: it reached the policy's K, drafted an end-of-text token,
# the draft was unsure (threshold policy), a lookup found no match, or a length limit.
STOP_REASONS = ("k", "eos", "threshold", "no_match", "limit")
STATUSES = ("accepted", "rejected", "discarded", "resampled", "bonus")
EMITTED = ("accepted", "resampled", "bonus")


class TraceError(ValueError):
    """A trace that cannot be read; the message names the line (1-based) and the field."""

    def __init__(self, message: str, line: int | None = None, field_name: str | None = None):
        where = f"line {line}: " if line is not None else ""
        what = f"field '{field_name}': " if field_name else ""
        super().__init__(f"{where}{what}{message}")
        self.reason = message
        self.line = line
        self.field_name = field_name


@dataclass(frozen=True)
class ModelInfo:
    """Which model was used and how it was loaded."""

    name: str  # what the user asked for: "builtin:tiny", a hub id or a folder
    path: str  # the local folder it was loaded from, or the hub id
    vocab_size: int
    params: int
    dtype: str
    device: str


def cost_ratio(target_ms: float | None, draft_ms: float | None) -> float | None:
    """c: one draft step over one target step; None when either was not measured."""
    if not target_ms or draft_ms is None:
        return None
    return draft_ms / target_ms


@dataclass(frozen=True)
class Settings:
    """What the user chose for a session; K and sampling may change between rounds."""

    k: int = 4  # drafted tokens per round
    temperature: float = 1.0  # 0 = greedy
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1.0 = off
    seed: int = 0
    max_new_tokens: int = 64
    top_n: int = 20  # tokens kept per position in the trace, for the bars of a replay

    def validate(self) -> None:
        """Raise ValueError with a message a user can act on."""
        if not 1 <= self.k <= 32:
            raise ValueError(f"K must be between 1 and 32, got {self.k}")
        check_sampling(self.temperature, self.top_k, self.top_p)
        if self.max_new_tokens < 1:
            raise ValueError(f"max new tokens must be >= 1, got {self.max_new_tokens}")
        if not 1 <= self.top_n <= 1000:
            raise ValueError(f"top-N must be between 1 and 1000, got {self.top_n}")


@dataclass(frozen=True)
class TokenEvent:
    """One token of a round and its fate.

    Probabilities are at this token's position, after temperature / top-k / top-p.
    """

    id: int
    text: str
    status: str  # one of STATUSES
    p: float | None = None  # target probability of this token (None: discarded)
    q: float | None = None  # draft probability of this token (None: bonus)
    accept_prob: float | None = None  # min(1, p/q), judged tokens only
    u: float | None = None  # the uniform draw compared with accept_prob
    alpha: float | None = None  # sum_x min(p(x), q(x)) at this position
    residual: float | None = None  # probability under norm(max(0, p - q)) (resampled)
    # The top-N tokens by max(p, q) at this position: (id, p, q); q is None at a bonus
    # position and p is None at a discarded one.
    top: tuple[tuple[int, float | None, float | None], ...] = ()
    # For a resampled token: the top-N of the normalised residual it was drawn from.
    residual_top: tuple[tuple[int, float], ...] = ()
    # Texts of the ids in top / residual_top, so a replay can label bars without a tokenizer.
    top_text: tuple[str, ...] = ()
    residual_text: tuple[str, ...] = ()  # texts of the ids in residual_top
    p_rest: float | None = None  # target mass outside `top`
    q_rest: float | None = None  # draft mass outside `top`

    @property
    def emitted(self) -> bool:
        return self.status in EMITTED


@dataclass(frozen=True)
class Round:
    """One draft-and-verify round: K drafted tokens, their verdicts, one target token."""

    session_id: str
    index: int  # 0-based round number within the session
    context_len: int  # tokens (prompt + emitted) before the round
    draft_ms: float  # wall time of the K draft forward passes
    verify_ms: float  # wall time of the target pass and the verification
    n_drafted: int
    n_accepted: int
    tokens: tuple[TokenEvent, ...]
    settings: Settings | None = None  # the settings this round ran with
    # "eos", "max_new_tokens" or "context_length" when the session ended here
    finish_reason: str | None = None
    # Schema 1.1, optional. The K the policy chose (n_drafted may be fewer) and why drafting
    # stopped (one of STOP_REASONS).
    k: int | None = None
    stop: str | None = None
    events_ms: float | None = None  # building the token records (top-N lists): not verify_ms
    # Cost-model probes taken after this round, outside its times: {"context_len": n,
    # "target_ms": [[n_tokens, ms], ...], "draft_ms": ms}.
    probes: dict[str, Any] | None = None
    # [start, end): the context positions a prompt-lookup proposal was copied from.
    copied_from: tuple[int, int] | None = None
    # A round read from a trace file keeps its line here, (line number, bytes), while the
    # top-N lists of its tokens are left unparsed: they are four fifths of a trace and are
    # needed only to draw one position's bars. complete() parses them.
    source: tuple[int, bytes] | None = field(default=None, compare=False, repr=False)

    def complete(self) -> Round:
        """This round with every field of its tokens (top-N lists included) parsed.

        A round made by the engine, or already complete, is returned as it is; otherwise the
        stored line is parsed again (about a millisecond) and nothing is cached. Raises
        TraceError if the lists in that line are malformed.
        """
        if self.source is None:
            return self
        from .traceparse import complete_round

        return complete_round(self)

    def __eq__(self, other: object) -> bool:
        """Same record: a round read from a trace equals the round that was written, its
        unparsed top-N lists included."""
        if not isinstance(other, Round):
            return NotImplemented
        a, b = self.complete(), other.complete()
        return all(getattr(a, name) == getattr(b, name) for name in _ROUND_FIELDS)

    def __hash__(self) -> int:
        return hash((self.session_id, self.index, self.context_len, self.n_accepted))

    @property
    def emitted(self) -> tuple[TokenEvent, ...]:
        return tuple(t for t in self.tokens if t.emitted)

    @property
    def n_emitted(self) -> int:
        return sum(1 for t in self.tokens if t.emitted)

    @property
    def n_judged(self) -> int:
        return sum(1 for t in self.tokens if t.status in ("accepted", "rejected"))

    @property
    def ms(self) -> float:
        return self.draft_ms + self.verify_ms


_ROUND_FIELDS = tuple(f.name for f in dataclasses.fields(Round) if f.compare)


@dataclass(frozen=True)
class SessionHeader:
    """Everything about a session that is fixed when it starts."""

    session_id: str
    prompt: str
    prompt_ids: tuple[int, ...]
    target: ModelInfo
    draft: ModelInfo
    settings: Settings
    created: str  # ISO 8601
    specviz: str  # version that wrote it
    baseline_ms_per_token: float | None  # target-only decode time per token, measured
    draft_ms_per_token: float | None  # draft-only decode time per token, measured
    prompt_text: tuple[str, ...] = ()  # the text of each prompt token
    # Schema 1.1, optional: how tokens were drafted ({"kind": "model" | "lookup" |
    # "early-exit", ...parameters}) and how K was chosen ({"kind": "constant" | "heuristic" |
    # "threshold", ...}). None in a 1.0 trace: a model drafter and a constant K.
    drafter: dict[str, Any] | None = None
    policy: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # unknown fields, kept for writing

    @property
    def cost_ratio(self) -> float | None:
        """c: one draft step over one target step."""
        return cost_ratio(self.baseline_ms_per_token, self.draft_ms_per_token)


def header_to_json(header: SessionHeader) -> dict[str, Any]:
    obj: dict[str, Any] = dict(header.extra)
    obj.update(
        type="session",
        schema=SCHEMA,
        specviz=header.specviz,
        session_id=header.session_id,
        created=header.created,
        prompt=header.prompt,
        prompt_ids=list(header.prompt_ids),
        prompt_text=list(header.prompt_text),
        target=dataclasses.asdict(header.target),
        draft=dataclasses.asdict(header.draft),
        settings=dataclasses.asdict(header.settings),
        baseline_ms_per_token=header.baseline_ms_per_token,
        draft_ms_per_token=header.draft_ms_per_token,
    )
    for name in HEADER_OPTIONAL:
        value = getattr(header, name)
        if value is not None:
            obj[name] = value
    return obj


# Optional fields of schema 1.1, written only when set.
HEADER_OPTIONAL = ("drafter", "policy")
ROUND_OPTIONAL = ("finish_reason", "k", "stop", "events_ms", "probes", "copied_from")


def event_to_json(event: TokenEvent) -> dict[str, Any]:
    obj = {"id": event.id, "text": event.text, "status": event.status}
    for name in ("p", "q", "accept_prob", "u", "alpha", "residual", "p_rest", "q_rest"):
        value = getattr(event, name)
        if value is not None:
            obj[name] = value
    if event.top:
        obj["top"] = event.top
    if event.top_text:
        obj["top_text"] = event.top_text
    if event.residual_top:
        obj["residual_top"] = event.residual_top
    if event.residual_text:
        obj["residual_text"] = event.residual_text
    return obj


def round_to_json(rnd: Round) -> dict[str, Any]:
    rnd = rnd.complete()
    obj: dict[str, Any] = {
        "type": "round",
        "index": rnd.index,
        "context_len": rnd.context_len,
        "draft_ms": rnd.draft_ms,
        "verify_ms": rnd.verify_ms,
        "n_drafted": rnd.n_drafted,
        "n_accepted": rnd.n_accepted,
        "tokens": [event_to_json(t) for t in rnd.tokens],
    }
    if rnd.settings is not None:
        obj["settings"] = dataclasses.asdict(rnd.settings)
    for name in ROUND_OPTIONAL:
        value = getattr(rnd, name)
        if value is not None:
            obj[name] = value
    return obj


def _plain_number(value: Any) -> float | int:
    """What orjson does not write by itself and json did: subclasses of float and int."""
    if isinstance(value, float):
        return float(value)
    if isinstance(value, int):
        return int(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(obj: dict[str, Any]) -> str:
    """One compact JSON line, UTF-8 text as is. orjson writes each float in its shortest
    round-tripping form (a trace reads back bit for bit), tuples as lists, numpy scalars
    as numbers and a non-finite float as null; 21 times faster than json and the cleaning
    pass it replaced (benchmarks/trace_write.py)."""
    return orjson.dumps(obj, default=_plain_number, option=orjson.OPT_SERIALIZE_NUMPY).decode()
