"""Reading and writing trace files (JSON Lines, schema "specviz.trace/1.x").

Writing is atomic: a temporary file in the same folder, flushed and renamed into place.
Reading is strict about structure (a TraceError naming the line and the field) and tolerant
about the future: unknown header fields are kept, unknown round and token fields and unknown
record types are ignored, a newer minor version is read. A cut-off last line (a crash during
a write) is dropped with a warning; the rounds before it load. README.md (Trace format) has the
format; specviz.core.trace.check_session checks that a loaded trace's numbers agree with each other.

The top-N lists of a round's tokens are four fifths of a trace: the reader cuts them out of
each line unparsed and the loaded session keeps the line (specviz.core.trace.round_lines), and
Session.details() parses them when a view or a check needs them. Their structure is checked
then, the rest of the line at load. Reading a line costs at most a few times its size in
memory: a line that would cost more is refused, its size named (round_lines.LineBudget).
"""

from __future__ import annotations

import gc
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from specviz.core.resources import check_regular_file
from specviz.core.trace.fields import type_error
from specviz.core.trace.parse import (
    line_json,
    line_text,
    parse_event,
    parse_header,
    parse_round,
    schema_version,
)
from specviz.core.trace.records import SCHEMA, SCHEMA_MINOR, Round, TraceError
from specviz.core.trace.round_lines import (
    LineBudget,
    RoundLines,
    parse_cost,
    read_round,
    without_top_lists,
)
from specviz.core.trace.serialize import dumps, header_to_json, round_to_json
from specviz.core.trace.session import Session
from specviz.core.trace.tempfiles import remove_stale_temps, temp_prefix

__all__ = [
    "check_writable",
    "round_text",
    "rounds_text",
    "load",
    "parse_event",
    "parse_header",
    "parse_lines",
    "parse_round",
    "save",
    "session_lines",
    "write_atomic",
]

# A round line at K=32 and top-N 1000 is about 2 MB (a 64-node tree's about 4 MB); a
# longer line is not a trace's.
MAX_LINE_BYTES = 16 * 2**20


# ---------------------------------------------------------------------------------- writing


def session_lines(session: Session, summary: dict | None = None) -> Iterable[str]:
    """The trace's lines: the header, a line per round and, when the caller hands one (the
    figures are core.metrics' to compute), the summary line."""
    yield dumps(header_to_json(session.header))
    yield from rounds_text(session)
    if summary is not None and session.rounds:
        yield dumps({"type": "summary", **summary})


def round_text(rnd: Round) -> str:
    """A round's line, written from the record."""
    return dumps(round_to_json(rnd))


def rounds_text(session: Session) -> Iterator[str]:
    """The session's round lines: as they were read, for a session loaded from a trace
    (nothing re-parsed, and fields of a newer version kept), else written from the records."""
    lines = session.lines
    for index, rnd in enumerate(session.rounds):
        text = None if lines is None else lines.text(index)
        yield round_text(rnd) if text is None else text


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


def _existing_mode(path: Path) -> int:
    """The mode of the file being replaced, or 0666 less the umask for a new one."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_atomic(path: str | os.PathLike[str], lines: Iterable[str]) -> None:
    """Write lines to path through a temporary file in the same folder and a rename.

    A failure at any point (an exception from `lines`, a full disk, a failed rename) leaves
    whatever was at path before untouched and removes the temporary file.
    """
    path = Path(path)
    remove_stale_temps(path.parent)  # what a killed write to this folder left
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            for line in lines:
                f.write(line)
                f.write("\n")
            f.flush()
            os.fsync(f.fileno())
            # mkstemp creates 0600; give the file the mode a plain open() would have.
            os.chmod(tmp, _existing_mode(path))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save(session: Session, path: str | os.PathLike[str], summary: dict | None = None) -> None:
    """Write the session atomically, with its summary line when one is given."""
    write_atomic(path, session_lines(session, summary))


# ---------------------------------------------------------------------------------- reading


class _Reader:
    """Builds a Session line by line. A bad line is fatal unless it is the last one."""

    def __init__(self, keep: bool = True) -> None:
        """keep=False: each round goes to `out` with its line number, whole (its top-N lists
        parsed), for a reader that takes it away (stream); the session keeps none."""
        self.keep = keep
        self.out: list[tuple[int, Round]] = []
        self.count = 0  # rounds read
        self.session: Session | None = None
        self.pending: TraceError | None = None  # a bad line; fatal if anything follows it
        self.settings_cache: dict = {}
        self.ignored: dict[str, int] = {}
        self.lines = RoundLines()
        self.summary_line: int | None = None  # the summary's line: only the last may be one

    def feed(self, number: int, raw: str | bytes) -> None:
        if self.pending is not None:
            if raw.strip():
                raise self.pending
            return
        if isinstance(raw, bytes):
            if b"\0" in raw:
                return self._bad_line(TraceError("binary data (NUL bytes), not text", number))
            if self.session is not None and self._read_round(number, raw):
                return
            LineBudget(len(raw), number).spend(parse_cost(raw))  # to be parsed whole
        hint = "; a trace holds one JSON object per line" if self.session is None else ""
        try:
            text = line_text(raw, number).strip()
            if not text:
                return
            obj = line_json(text, number, hint)
        except TraceError as error:
            return self._bad_line(error)
        self._record(obj, number, None)

    def _read_round(self, number: int, raw: bytes) -> bool:
        """Read a round line in parts, its top-N lists cut out (kept: left in the line for
        Session.details(); else parsed a list at a time); False: to be read whole. orjson
        refuses what json accepts (NaN) or words differently: such a line is read whole."""
        if not self.keep:
            rnd = read_round(raw, number, self.session.session_id, self.settings_cache)
            if rnd is not None:
                self._record({"type": "round"}, number, None, rnd)
            return rnd is not None
        light, cut = without_top_lists(raw)
        LineBudget(len(raw), number).spend(parse_cost(light))
        try:
            obj = orjson.loads(light)
        except orjson.JSONDecodeError:
            return False
        self._record(obj, number, raw if cut else None)
        return True

    def _record(self, obj: Any, number: int, raw: bytes | None, rnd: Round | None = None) -> None:
        """A line's JSON value; raw: the line, if its top-N lists were cut out unparsed;
        rnd: the round, if the line was read in parts (obj is then {"type": "round"})."""
        if type(obj) is not dict:
            raise TraceError(f"expected a JSON object, got {type(obj).__name__}", number)
        if self.session is None:
            self.session = Session(parse_header(obj, number), lines=self.lines)
            if schema_version(obj["schema"], number)[1] > SCHEMA_MINOR:
                self.session.warnings.append(
                    f"written as {obj['schema']}, newer than this specviz ({SCHEMA}): "
                    "fields and records it does not know were ignored"
                )
            return
        kind = obj.get("type")
        if kind == "round":
            if self.summary_line is not None:
                raise TraceError(
                    f"a round after the summary line (line {self.summary_line}): the summary "
                    "is the last line",
                    number,
                    "type",
                )
            session = self.session
            rnd = rnd or parse_round(obj, session.session_id, number, self.settings_cache)
            if rnd.index != self.count:
                raise TraceError(f"expected round {self.count}, got {rnd.index}", number, "index")
            self.count += 1
            if self.keep:
                session.rounds.append(rnd)
                self.lines.add(number, raw)
            else:
                self.out.append((number, rnd))
        elif kind == "summary":
            self.summary_line = number  # derived: recomputed from the rounds
            return
        elif kind == "session":
            raise TraceError("a second session header: a trace holds one session", number, "type")
        elif isinstance(kind, str):
            self.ignored[kind] = self.ignored.get(kind, 0) + 1  # from a newer minor version
        elif kind is None:
            raise TraceError("missing", number, "type")
        else:
            raise type_error(kind, str, number, "type")

    def _bad_line(self, error: TraceError) -> None:
        if self.session is None:
            raise error
        self.pending = error  # possibly cut off by a crash mid-write: fatal if more follows

    def finish(self) -> Session:
        if self.session is None:
            raise TraceError("the file is empty: no session header", 1)
        warnings = self.session.warnings
        if self.pending is not None:
            done = self.count
            warnings.append(
                f"{self.pending} (a cut-off last line, as a crash during a write leaves; "
                f"the {done} complete round{'s' if done != 1 else ''} before it were loaded)"
            )
        for kind, count in sorted(self.ignored.items()):
            warnings.append(f"ignored {count} line(s) of record type {kind!r} (a newer format)")
        return self.session


def parse_lines(
    lines: Iterable[str | bytes], progress: Callable[[int], None] | None = None
) -> Session:
    """Build a Session from trace lines (str or UTF-8 bytes); a cut-off last line is dropped
    with a warning in Session.warnings. progress(n) is called every 1000 lines read."""
    reader = _Reader()
    for number, raw in enumerate(lines, start=1):
        reader.feed(number, raw)
        if progress is not None and number % 1000 == 0:
            progress(number)
    return reader.finish()


def _feed_file(
    path: Path, reader: _Reader, progress: Callable[[float], None] | None
) -> Iterator[None]:
    """Feed a trace file to `reader` a line at a time, yielding after each line: a regular
    file (a FIFO would block, a device never end), no NUL bytes, no line over MAX_LINE_BYTES.
    progress(fraction of the bytes read) about every 1% and once with 1.0 at the end."""
    check_regular_file(path)
    with open(path, "rb") as f:
        if b"\0" in f.read(4096):
            raise TraceError(f"{path.name} is a binary file, not a specviz trace", 1)
        f.seek(0)
        total = os.fstat(f.fileno()).st_size
        step = max(total // 100, 1)
        done, next_report, number = 0, step, 0
        while raw := f.readline(MAX_LINE_BYTES):
            number += 1
            if len(raw) == MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise TraceError(f"longer than {MAX_LINE_BYTES >> 20} MiB: not a trace", number)
            reader.feed(number, raw)
            yield
            done += len(raw)
            if progress is not None and done >= next_report:
                progress(done / total)
                next_report = done + step


def stream(
    path: str | os.PathLike[str], progress: Callable[[float], None] | None = None
) -> Iterator[Session | tuple[int, Round]]:
    """Read a trace a round at a time, keeping none: first its Session (the header, no
    rounds), then (line number, round) for each round, whole (top-N lists parsed); the
    session's warnings are complete once the rounds are. For a reader whose memory must not
    grow with the file (`inspect` of a huge trace); the same checks as load."""
    reader = _Reader(keep=False)
    announced = False
    for _ in _feed_file(Path(path), reader, progress):
        if not announced and reader.session is not None:
            announced = True
            yield reader.session
        if reader.out:
            yield from reader.out
            reader.out.clear()
    reader.finish()
    if progress is not None:
        progress(1.0)


def load(path: str | os.PathLike[str], progress: Callable[[float], None] | None = None) -> Session:
    """Read a trace file. Raises TraceError (bad content) or OSError (cannot read).

    progress(fraction), fraction of the file's bytes read in [0, 1], is called on the calling
    thread about every 1% and once with 1.0 at the end. The file is read one line at a time;
    the session keeps each round's line for Session.details(), so it holds about 1.7 times
    the file's size (benchmarks/trace_load.py). A round line is read without its top-N lists,
    which are parsed when a view or a check asks for them.
    """
    reader = _Reader()
    collecting = gc.isenabled()
    # Loading makes millions of small records and no reference cycles: the cyclic collector,
    # run again and again as they pile up, would take a third of the time.
    gc.disable()
    try:
        for _ in _feed_file(Path(path), reader, progress):
            pass
    finally:
        if collecting:
            gc.enable()
    session = reader.finish()
    if progress is not None:
        progress(1.0)
    return session
