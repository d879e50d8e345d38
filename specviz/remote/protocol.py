"""The messages of `specviz serve` (docs/protocol.md), without the sockets.

Every message is a ZeroMQ multipart message whose first frame is one JSON object (UTF-8).
A request carries the server's token, an `op` and an `id`; every reply names the request
it answers in `re`. Sessions and rounds travel as the trace format's header and round
lines (core.trace.serialize: header_to_json / round_to_json), so a client parses them with the
trace reader and gets the very records a local engine makes, floats bit for bit. The one
binary payload is a position's full p and q: raw little-endian float64 frames after the
JSON frame.
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
from typing import Any

import numpy as np
import orjson

from specviz.core.trace.files import MAX_LINE_BYTES
from specviz.core.trace.parse import parse_header, parse_round
from specviz.core.trace.records import ModelInfo, Round, SessionHeader, Settings, TraceError
from specviz.core.trace.serialize import dumps_bytes, header_to_json, round_to_json

PROTOCOL = "specviz.remote/1"
# The settings both ends give their sockets (server and client alike):
HEARTBEAT_MS = 2000  # ZeroMQ pings each peer this often ...
HEARTBEAT_TIMEOUT_MS = 10_000  # ... and drops one that has not answered for this long
# How far a run gets ahead of a client that reads slowly (or is paused in a debugger): a few
# rounds in ZeroMQ's queues on each side and a small kernel buffer. Enough to keep the engine
# busy, small enough that a pause stops the stream at once.
QUEUED_ROUNDS = 4
SOCKET_BUFFER = 64 << 10


def endpoint_host(host: str) -> str:
    """A host as a ZeroMQ TCP endpoint writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


OPS = (
    "hello",
    "start",
    "step",
    "run",
    "pause",
    "settings",
    "continue",
    "remeasure",
    "position",
    "greedy",
    "sweep",
    "resume",
    "close",
)
# A request is small (a prompt, settings, a context's ids): anything larger is answered with
# an error. ZeroMQ itself drops a peer whose message exceeds HARD_MAX_BYTES, unread.
MAX_REQUEST_BYTES = 1 << 20
HARD_MAX_BYTES = 16 << 20
# What a client accepts from a server: a round at K = 32 and top-N = 1000 is ~2 MB, a
# position of a 256k vocabulary 8 MB; no more than a trace line may hold (a longer round line
# would make a trace no reader opens), so ZeroMQ drops a server that sends more, unread.
MAX_REPLY_BYTES = MAX_LINE_BYTES
POSITION_ARRAYS = ("p_raw", "q_raw", "p", "q")


class RemoteError(Exception):
    """A request the server answered with an error; `code` says which kind (below)."""

    def __init__(self, message: str, code: str = "error"):
        super().__init__(message)
        self.code = code


class Refused(RemoteError):
    """Wrong token, or another client drives the server's session."""


class ConnectionLost(RemoteError):
    """No server, or the server went away: whatever was received before stays valid."""

    def __init__(self, message: str):
        super().__init__(message, "connection_lost")


class BadMessage(ValueError):
    """A request the server cannot read; answered with an error reply, never fatal."""


def new_token() -> str:
    """48 hex digits, as Jupyter's token."""
    return secrets.token_hex(24)


def token_matches(given: Any, expected: str) -> bool:
    return isinstance(given, str) and hmac.compare_digest(given.encode(), expected.encode())


# ---------------------------------------------------------------------------- frames


def encode(obj: dict[str, Any]) -> bytes:
    return dumps_bytes(obj)


def decode_request(frames: list[bytes]) -> dict[str, Any]:
    """A request's JSON object, or BadMessage naming what is wrong with it."""
    size = sum(len(f) for f in frames)
    if size > MAX_REQUEST_BYTES:
        raise BadMessage(f"a request of {size} bytes; the limit is {MAX_REQUEST_BYTES} bytes")
    if len(frames) != 1:
        raise BadMessage(f"a request is one frame, got {len(frames)}")
    try:
        obj = orjson.loads(frames[0])
    except orjson.JSONDecodeError as e:
        raise BadMessage(f"not a JSON object ({e})") from None
    if type(obj) is not dict:
        raise BadMessage(f"expected a JSON object, got {type(obj).__name__}")
    op = obj.get("op")
    if op not in OPS:
        raise BadMessage(f"unknown op {op!r} (one of {', '.join(OPS)})")
    if "id" in obj and type(obj["id"]) is not int:
        raise BadMessage("'id' must be an integer")
    return obj


def decode_reply(frames: list[bytes]) -> dict[str, Any]:
    try:
        obj = orjson.loads(frames[0])
    except (orjson.JSONDecodeError, IndexError):
        raise RemoteError("the server sent something that is not JSON", "bad_reply") from None
    if type(obj) is not dict or not isinstance(obj.get("type"), str):
        raise RemoteError("the server sent a message without a type", "bad_reply")
    return obj


def error(code: str, message: str, re: int | None = None) -> dict[str, Any]:
    return {"type": "error", "re": re, "code": code, "message": message}


def raise_error(reply: dict[str, Any]) -> None:
    code = str(reply.get("code", "error"))
    message = str(reply.get("message", "the server refused the request"))
    raise (Refused if code in ("bad_token", "busy") else RemoteError)(message, code)


# ---------------------------------------------------------------------------- records


_SETTINGS_TYPES = {f.name: f.type for f in dataclasses.fields(Settings)}


def settings_from_json(obj: Any) -> Settings:
    """Settings from a request; BadMessage for a wrong field, ValueError for a bad value."""
    if type(obj) is not dict:
        raise BadMessage("'settings' must be a JSON object")
    defaults = Settings()
    values = {}
    for name, value in obj.items():
        kind = _SETTINGS_TYPES.get(name)
        if kind is None:
            raise BadMessage(f"unknown setting {name!r}")
        values[name] = typed(f"setting {name!r}", value, type(getattr(defaults, name)))
    settings = Settings(**values)
    settings.validate()
    return settings


def typed(what: str, value: Any, want: type) -> Any:
    """A JSON value as `want` (bool, str, int or float); BadMessage naming `what` if it is
    not one: an int is a float too, a bool is no number."""
    if want in (bool, str):
        ok = type(value) is want
    else:
        ok = type(value) is not bool and isinstance(value, (int, float) if want is float else int)
    if not ok:
        raise BadMessage(f"{what} must be a {want.__name__}")
    return want(value)


def model_info(obj: Any) -> ModelInfo:
    """A hello's model description; fields a newer server adds are left out."""
    names = {f.name for f in dataclasses.fields(ModelInfo)}
    try:
        return ModelInfo(**{k: v for k, v in obj.items() if k in names})
    except (AttributeError, TypeError) as e:
        raise RemoteError(f"the server described its models badly: {e}", "bad_reply") from None


def check_hello(reply: dict[str, Any]) -> None:
    """Refuse a server that speaks another major version ("specviz.remote/1.x" here)."""
    protocol = reply.get("protocol")
    name, _, version = str(protocol).partition("/")
    if (name, version.split(".")[0]) != tuple(PROTOCOL.split("/")):
        raise RemoteError(
            f"the server speaks {protocol!r}, this specviz {PROTOCOL}: update one of them",
            "bad_reply",
        )


def drafting_to_json(drafter: Any, policy: Any) -> dict[str, Any]:
    """A start request's `drafter` and `policy` (core.drafters.registry.DrafterConfig and
    core.decoding.k_policy.PolicyConfig)."""
    return {"drafter": drafter.to_json(), "policy": dataclasses.asdict(policy)}


def drafting_from_json(request: dict[str, Any], default: tuple) -> tuple:
    """(DrafterConfig, PolicyConfig) from a start request, each the server's default when
    absent; BadMessage for a wrong field, ValueError for a bad value."""
    from specviz.core.decoding.k_policy import PolicyConfig
    from specviz.core.drafters.registry import DrafterConfig

    drafter, policy = default
    obj = request.get("drafter")
    if obj is not None:
        if type(obj) is not dict or "kind" in obj and type(obj["kind"]) is not str:
            raise BadMessage("'drafter' must be an object with a kind and its parameters")
        try:
            drafter = DrafterConfig.from_json(obj)
        except ValueError as e:
            if str(e).startswith("unknown drafter fields"):
                raise BadMessage(f"'drafter': {e}") from None
            raise
        drafter.validate()
    obj = request.get("policy")
    if obj is not None:
        fields = {f.name for f in dataclasses.fields(PolicyConfig)}
        if type(obj) is not dict or not set(obj) <= fields:
            raise BadMessage(f"'policy' must be an object with fields among {sorted(fields)}")
        try:
            policy = PolicyConfig(**obj)
        except TypeError as e:
            raise BadMessage(f"'policy': {e}") from None
        policy.validate()
    return drafter, policy


def header_message(header: SessionHeader, re: int | None) -> bytes:
    """The session header line, as a trace file's first line, plus `re`."""
    return encode({**header_to_json(header), "re": re})


def round_message(rnd: Round) -> bytes:
    """The round line, as the trace writer writes it."""
    return dumps_bytes(round_to_json(rnd))


def header_from(obj: dict[str, Any]) -> SessionHeader:
    obj = {k: v for k, v in obj.items() if k != "re"}
    try:
        return parse_header(obj, 1)
    except TraceError as e:
        raise RemoteError(f"the server sent a bad session header: {e}", "bad_reply") from None


def round_from(
    obj: dict[str, Any], session_id: str, number: int, settings_cache: dict | None = None
) -> Round:
    """settings_cache: a dict kept across a session's rounds (they repeat their settings)."""
    try:
        return parse_round(obj, session_id, number, settings_cache)
    except TraceError as e:
        raise RemoteError(f"the server sent a bad round: {e}", "bad_reply") from None


def position_frames(result: Any, re: int | None) -> list[bytes]:
    """A core.lab.position.PositionDistributions as a JSON frame and four float64 frames."""
    meta = {
        "type": "position",
        "re": re,
        "context_len": result.context_len,
        "sampling": dataclasses.asdict(result.settings),
        "top_n": result.top_n,
        "top_ids": list(result.top_ids),
        "top_text": list(result.top_text),
        "arrays": list(POSITION_ARRAYS),
        "vocab": int(len(result.p)),
    }
    arrays = [np.ascontiguousarray(getattr(result, n), dtype="<f8") for n in POSITION_ARRAYS]
    return [encode(meta), *(a.tobytes() for a in arrays)]


def position_from(meta: dict[str, Any], buffers: list[bytes]) -> Any:
    from specviz.core.decoding.warp import SamplingConfig
    from specviz.core.lab.position import PositionDistributions

    try:
        vocab = int(meta["vocab"])
        if len(buffers) != len(POSITION_ARRAYS) or any(len(b) != 8 * vocab for b in buffers):
            raise ValueError("array sizes do not match the vocabulary")
        arrays = [np.frombuffer(b, dtype="<f8").astype(np.float64) for b in buffers]
        return PositionDistributions(
            context_len=int(meta["context_len"]),
            settings=SamplingConfig(**meta["sampling"]),
            top_n=int(meta["top_n"]),
            top_ids=tuple(int(i) for i in meta["top_ids"]),
            top_text=tuple(str(t) for t in meta["top_text"]),
            **dict(zip(POSITION_ARRAYS, arrays, strict=True)),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise RemoteError(f"the server sent a bad position: {e}", "bad_reply") from None
