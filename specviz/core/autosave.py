"""Autosave of the running session, so that a crash of the app loses at most one round.

The file is an ordinary trace (README.md, Trace format) without its summary line, written as
the session runs: the header when it starts, then each round as one line, flushed (and
fsync'ed at least every SYNC_S). A crash mid-write leaves at most a cut-off last line, which
tracefile.load drops with a warning. On the next launch, find_restorable() says whether
there is a session to offer back, and restore() reads it.

Usage (GUI thread; each call is one short write, no model needed):

    saver = Autosaver()                    # $SPECVIZ_CACHE or ~/.cache/specviz
    found = Autosaver.find_restorable()    # at launch: offer to restore found
    session = Autosaver.restore(found)     # if the user says yes; else saver.discard()
    saver.start(header); saver.add(rnd)... # as a session runs
    saver.start(session.header, session.rounds)  # a restored session that goes on
    saver.finish()                         # the session was exported, reset or closed

Every method raises OSError when the disk does (full, read-only): the session itself is
unaffected, and the caller can report it and carry on without autosave.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from itertools import chain
from pathlib import Path

from .session import Session
from .trace import Round, SessionHeader, TraceError, dumps, header_to_json
from .tracefile import load, round_line, write_atomic
from .traceparse import parse_header

FILENAME = "autosave.jsonl"
# Rounds reach the system at once and the disk at least this often: an fsync per round cost
# the window 3 ms a round on these machines, while an app crash loses nothing the system has.
SYNC_S = 1.0


def cache_folder() -> Path:
    """$SPECVIZ_CACHE if set, else ~/.cache/specviz."""
    folder = os.environ.get("SPECVIZ_CACHE")
    return Path(folder) if folder else Path.home() / ".cache" / "specviz"


class Autosaver:
    """Appends the running session to <folder>/autosave.jsonl, a flushed line a round."""

    def __init__(self, folder: str | os.PathLike[str] | None = None):
        self.folder = Path(folder) if folder is not None else cache_folder()
        self.path = self.folder / FILENAME
        self.session_id: str | None = None  # the session being saved; None: not started
        self._synced = 0.0  # time.monotonic() of the last fsync

    @property
    def active(self) -> bool:
        return self.session_id is not None

    def start(self, header: SessionHeader, rounds: Iterable[Round] = ()) -> None:
        """Begin a session's autosave, replacing any earlier one (restore that first).
        `rounds`: those the session already has (a restored session that goes on)."""
        self.session_id = None
        self.folder.mkdir(parents=True, exist_ok=True)
        lines = chain([dumps(header_to_json(header))], map(round_line, rounds))
        write_atomic(self.path, lines)  # never a half header
        self.session_id = header.session_id

    def add(self, rnd: Round) -> bool:
        """Append one round; False (nothing written) when not started or the round belongs
        to another session. Returns once the line is with the system (on the disk within
        SYNC_S). The file is opened for each round, so nothing stays open between rounds."""
        if self.session_id is None or rnd.session_id != self.session_id:
            return False
        with open(self.path, "a", encoding="utf-8", newline="\n") as f:
            f.write(round_line(rnd) + "\n")
            f.flush()  # with the system now: an app that crashes loses nothing written
            if time.monotonic() - self._synced >= SYNC_S:
                os.fsync(f.fileno())  # on the disk: a power cut loses at most SYNC_S
                self._synced = time.monotonic()
        return True

    def finish(self) -> None:
        """The session ended cleanly (exported, reset, or the app closed): remove the file."""
        self.session_id = None
        self.path.unlink(missing_ok=True)

    def discard(self) -> None:
        """Throw the autosave away (the user declined to restore it): remove the file."""
        self.finish()

    @staticmethod
    def find_restorable(folder: str | os.PathLike[str] | None = None) -> Path | None:
        """The autosave left by an earlier run, if it holds a session header and at least
        one round line; None otherwise. Reads two lines, whatever the file's size."""
        path = (Path(folder) if folder is not None else cache_folder()) / FILENAME
        try:
            with open(path, "rb") as f:
                first, second = f.readline(), f.readline()
            parse_header(_json_object(first))
        except (OSError, ValueError):
            return None  # no file, unreadable, or not even a complete header: nothing to offer
        return path if second.strip() else None

    @staticmethod
    def restore(path: str | os.PathLike[str]) -> Session:
        """The autosaved session: its complete rounds (a cut-off last line is dropped and
        noted in Session.warnings). Raises TraceError or OSError."""
        return load(path)


def _json_object(line: bytes) -> dict:
    obj = json.loads(line.decode("utf-8"))
    if not isinstance(obj, dict):
        raise TraceError("expected a JSON object", 1)
    return obj
