"""Reading and writing trace files (JSON Lines, schema "specviz.trace/1").

Writing is atomic: a temporary file in the same folder, flushed and renamed into place.
Reading is strict about structure (a clear TraceError naming the line and field) and
tolerant about the future (unknown fields are kept or ignored).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .session import Session
from .stats import summary
from .trace import (
    SCHEMA_MAJOR,
    STATUSES,
    ModelInfo,
    Round,
    SessionHeader,
    Settings,
    TokenEvent,
    TraceError,
    dumps,
    header_to_json,
    round_to_json,
)

_HEADER_KEYS = {
    "type",
    "schema",
    "specviz",
    "session_id",
    "created",
    "prompt",
    "prompt_ids",
    "prompt_text",
    "target",
    "draft",
    "settings",
    "baseline_ms_per_token",
    "draft_ms_per_token",
}


def session_lines(session: Session, with_summary: bool = True) -> Iterable[str]:
    yield dumps(header_to_json(session.header))
    for rnd in session.rounds:
        yield dumps(round_to_json(rnd))
    if with_summary and session.rounds:
        yield dumps({"type": "summary", **summary(session)})


def check_writable(path: str | os.PathLike[str], force: bool = False) -> Path:
    """Fail early, before any model is loaded, if a trace cannot be written to path."""
    path = Path(path)
    if path.exists() and not force:
        raise FileExistsError(f"{path} already exists (use --force to overwrite it)")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder, not a file name")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise FileNotFoundError(f"folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise PermissionError(f"cannot write to folder {folder}")
    return path


def write_atomic(path: str | os.PathLike[str], lines: Iterable[str]) -> None:
    """Write lines to path through a temporary file in the same folder and a rename.

    A failure at any point leaves whatever was at path before untouched.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            for line in lines:
                f.write(line)
                f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save(session: Session, path: str | os.PathLike[str]) -> None:
    write_atomic(path, session_lines(session))


# ---------------------------------------------------------------------------------- reading


def _get(
    obj: dict[str, Any], key: str, kind: type | tuple[type, ...], line: int, optional: bool = False
) -> Any:
    if key not in obj or obj[key] is None:
        if optional:
            return None
        raise TraceError("missing", line, key)
    value = obj[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise TraceError(f"expected {getattr(kind, '__name__', kind)}, got {value!r}", line, key)
    return value


def _num(obj: dict[str, Any], key: str, line: int, optional: bool = True) -> float | None:
    return _get(obj, key, float, line, optional)


def _model(obj: Any, line: int, key: str) -> ModelInfo:
    if not isinstance(obj, dict):
        raise TraceError("expected an object", line, key)
    try:
        return ModelInfo(
            name=_get(obj, "name", str, line),
            path=_get(obj, "path", str, line),
            vocab_size=_get(obj, "vocab_size", int, line),
            params=_get(obj, "params", int, line),
            dtype=_get(obj, "dtype", str, line),
            device=_get(obj, "device", str, line),
        )
    except TraceError as e:
        raise TraceError(f"in '{key}': {e.args[0].split(': ', 1)[-1]}", line, None) from None


def _settings(obj: Any, line: int) -> Settings:
    if not isinstance(obj, dict):
        raise TraceError("expected an object", line, "settings")
    defaults = Settings()
    values = {}
    for name, default in vars(defaults).items():
        kind = float if isinstance(default, float) else int
        value = _get(obj, name, kind, line, optional=True)
        values[name] = default if value is None else value
    return Settings(**values)


def parse_header(obj: dict[str, Any], line: int = 1) -> SessionHeader:
    if obj.get("type") != "session":
        raise TraceError("the first line must be the session header (type 'session')", line)
    schema = _get(obj, "schema", str, line)
    name, _, version = schema.partition("/")
    if name != "specviz.trace" or not version.split(".")[0].isdigit():
        raise TraceError(f"not a specviz trace schema: {schema!r}", line, "schema")
    if int(version.split(".")[0]) != SCHEMA_MAJOR:
        raise TraceError(
            f"schema {schema!r} is not supported by this specviz (it reads "
            f"specviz.trace/{SCHEMA_MAJOR}); a newer specviz may read it",
            line,
            "schema",
        )
    ids = _get(obj, "prompt_ids", list, line)
    if not all(isinstance(i, int) for i in ids):
        raise TraceError("expected a list of token ids", line, "prompt_ids")
    return SessionHeader(
        session_id=_get(obj, "session_id", str, line, optional=True) or f"trace-{id(obj):x}",
        prompt=_get(obj, "prompt", str, line),
        prompt_ids=tuple(ids),
        prompt_text=tuple(_get(obj, "prompt_text", list, line, optional=True) or ()),
        target=_model(_get(obj, "target", dict, line), line, "target"),
        draft=_model(_get(obj, "draft", dict, line), line, "draft"),
        settings=_settings(_get(obj, "settings", dict, line), line),
        created=_get(obj, "created", str, line, optional=True) or "",
        specviz=_get(obj, "specviz", str, line, optional=True) or "",
        baseline_ms_per_token=_num(obj, "baseline_ms_per_token", line),
        draft_ms_per_token=_num(obj, "draft_ms_per_token", line),
        extra={k: v for k, v in obj.items() if k not in _HEADER_KEYS},
    )


def _top(value: Any, line: int, width: int, key: str) -> tuple:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(e, list) and len(e) == width and isinstance(e[0], int) for e in value
    ):
        raise TraceError(f"expected a list of [id, {'p, q' if width == 3 else 'prob'}]", line, key)
    for entry in value:
        if not all(v is None or isinstance(v, (int, float)) for v in entry[1:]):
            raise TraceError(f"expected numbers, got {entry!r}", line, key)
    return tuple(tuple(e) for e in value)


def parse_event(obj: Any, line: int, where: str) -> TokenEvent:
    if not isinstance(obj, dict):
        raise TraceError("expected an object", line, where)
    try:
        status = _get(obj, "status", str, line)
        if status not in STATUSES:
            raise TraceError(
                f"unknown status {status!r} (one of {', '.join(STATUSES)})", line, "status"
            )
        return TokenEvent(
            id=_get(obj, "id", int, line),
            text=_get(obj, "text", str, line),
            status=status,
            p=_num(obj, "p", line),
            q=_num(obj, "q", line),
            accept_prob=_num(obj, "accept_prob", line),
            u=_num(obj, "u", line),
            alpha=_num(obj, "alpha", line),
            residual=_num(obj, "residual", line),
            p_rest=_num(obj, "p_rest", line),
            q_rest=_num(obj, "q_rest", line),
            top=_top(obj.get("top"), line, 3, "top"),
            residual_top=_top(obj.get("residual_top"), line, 2, "residual_top"),
            top_text=tuple(_get(obj, "top_text", list, line, optional=True) or ()),
        )
    except TraceError as e:
        raise TraceError(f"{where}: {e.args[0].split(': ', 1)[-1]}", line) from None


def parse_round(obj: dict[str, Any], session_id: str, line: int) -> Round:
    tokens = _get(obj, "tokens", list, line)
    settings = obj.get("settings")
    return Round(
        session_id=session_id,
        index=_get(obj, "index", int, line),
        context_len=_get(obj, "context_len", int, line),
        draft_ms=_get(obj, "draft_ms", float, line),
        verify_ms=_get(obj, "verify_ms", float, line),
        n_drafted=_get(obj, "n_drafted", int, line),
        n_accepted=_get(obj, "n_accepted", int, line),
        tokens=tuple(parse_event(t, line, f"tokens[{i}]") for i, t in enumerate(tokens)),
        settings=None if settings is None else _settings(settings, line),
        finish_reason=_get(obj, "finish_reason", str, line, optional=True),
    )


def parse_lines(lines: Iterable[str], progress: Callable[[int], None] | None = None) -> Session:
    """Build a Session from trace lines; a cut-off last line is dropped with a warning."""
    session: Session | None = None
    pending_error: TraceError | None = None
    for number, raw in enumerate(lines, start=1):
        if pending_error is not None:  # a bad line that was not the last one
            raise pending_error
        text = raw.strip()
        if not text:
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            err = TraceError(f"not valid JSON ({e.msg} at column {e.colno})", number)
            if session is None:
                raise err from None
            # Possibly a line cut off by a crash mid-write: fatal only if more lines follow.
            pending_error = err
            continue
        if not isinstance(obj, dict):
            raise TraceError("expected a JSON object", number)
        if session is None:
            session = Session(parse_header(obj, number))
            continue
        kind = obj.get("type")
        if kind == "round":
            rnd = parse_round(obj, session.session_id, number)
            if rnd.index != len(session.rounds):
                raise TraceError(
                    f"expected round {len(session.rounds)}, got {rnd.index}", number, "index"
                )
            session.rounds.append(rnd)
            if progress is not None and rnd.index % 1000 == 0:
                progress(number)
        elif kind == "summary":
            continue  # derived; recomputed from the rounds
        elif isinstance(kind, str):
            continue  # a record type from a newer minor version: ignored
        else:
            raise TraceError("missing", number, "type")
    if session is None:
        raise TraceError("the file is empty: no session header")
    if pending_error is not None:
        session.warnings.append(
            f"{pending_error} (a cut-off last line; the rounds before it were loaded)"
        )
    return session


def load(path: str | os.PathLike[str], progress: Callable[[int], None] | None = None) -> Session:
    """Read a trace file. Raises TraceError (bad content) or OSError (cannot read)."""
    path = Path(path)
    with open(path, "rb") as f:
        head = f.read(4096)
        if b"\0" in head:
            raise TraceError(f"{path.name} is a binary file, not a JSON Lines trace")
    with open(path, encoding="utf-8", errors="strict") as f:
        try:
            return parse_lines(f, progress)
        except UnicodeDecodeError as e:
            raise TraceError(f"{path.name} is not UTF-8 text ({e.reason})") from None
