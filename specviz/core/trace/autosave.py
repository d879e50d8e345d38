"""Autosave of the running session, so that a crash of the app loses at most one round.

The file is an ordinary trace (README.md, Trace format) without its summary line, written as
the session runs: the header when it starts, then each round as one line, flushed (and
fsync'ed at least every SYNC_S). A crash mid-write leaves at most a cut-off last line, which
tracefile.load drops with a warning.

Each Autosaver (one per window) writes its own file, `autosave-<pid>-<random>.jsonl`, and
holds a lock on it (fcntl.flock) while its session runs: the system drops the lock when the
process dies, however it dies. So two windows never write one file, a clean close removes
only its own, and find_all_restorable() offers every file whose writer is gone (a locked
file belongs to a window that is still open). `autosave.jsonl`, the single file of
earlier versions, is offered too.

Usage (GUI thread; each call is one short write, no model needed):

    saver = Autosaver()                        # $SPECVIZ_CACHE or ~/.cache/specviz
    for found in Autosaver.find_all_restorable(saver.folder):   # at launch, offer each:
        session = saver.adopt(found)           # yes: the session; the file is now saver's
        saver.discard(found)                   # no: remove that file
    saver.start(header); saver.add(rnd)...     # as a session runs
    saver.start(session.header, session)       # a restored session that goes on
    saver.finish()                             # exported, reset or closed: remove own file

Every method raises OSError when the disk does (full, read-only): the session itself is
unaffected, and the caller can report it and carry on without autosave.
"""

from __future__ import annotations

import json
import os
import time
import uuid
import weakref
from itertools import chain
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock
    fcntl = None

from specviz.core import resources
from specviz.core.trace.files import load, round_text, rounds_text
from specviz.core.trace.parse import parse_header
from specviz.core.trace.records import Round, SessionHeader, TraceError
from specviz.core.trace.serialize import dumps, header_to_json
from specviz.core.trace.session import Session
from specviz.core.trace.tempfiles import pid_alive

FILENAME = "autosave.jsonl"  # the one file of earlier versions (still offered back)
PATTERN = "autosave*.jsonl"
# Rounds reach the system at once and the disk at least this often: an fsync per round cost
# the window 3 ms a round on these machines, while an app crash loses nothing the system has.
SYNC_S = 1.0


def cache_folder() -> Path:
    """$SPECVIZ_CACHE if set, else ~/.cache/specviz (see core.resources)."""
    return resources.cache_dir()


def _lock(f) -> bool:
    """Take an exclusive lock on an open file without waiting; False if another holds it."""
    if fcntl is None:
        return True  # no flock here: ownership falls back to the pid in the name
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _writer_alive(path: Path) -> bool:
    """Whether another process is writing this autosave (it holds the lock)."""
    parts = path.stem.split("-")
    pid = int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None
    if pid == os.getpid():
        return False  # this process's own (a window that was dropped): offered back
    if fcntl is None:
        return pid is not None and pid_alive(pid)
    try:
        with open(path, "rb") as f:
            if not _lock(f):
                return True
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    except OSError:
        return False
    return False


def private_folder(folder: Path) -> None:
    """The autosave folder, made (or narrowed) to this user only: 0700."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.stat().st_mode & 0o077:
        folder.chmod(0o700)


class Autosaver:
    """Appends the running session to its own file in folder, a flushed line a round."""

    def __init__(self, folder: str | os.PathLike[str] | None = None):
        self.folder = Path(folder).expanduser() if folder is not None else cache_folder()
        self.path = self.folder / f"autosave-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
        self.session_id: str | None = None  # the session being saved; None: not started
        self._file = None  # open (and locked) while a session is saved
        self._synced = 0.0  # time.monotonic() of the last fsync

    @property
    def active(self) -> bool:
        return self.session_id is not None

    def _open(self):
        if self._file is None:
            private_folder(self.folder)
            # Prompts and outputs: readable by this user only (0600 in a 0700 folder).
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            os.fchmod(fd, 0o600)  # a file left by an older specviz at 0644 too
            self._file = os.fdopen(fd, "r+", encoding="utf-8", newline="\n")
            _lock(self._file)  # a fresh name of this process: nobody else holds it
            # A saver dropped without finish() (a crash in a test, a window torn down)
            # closes its file quietly; the file stays, to be offered back.
            weakref.finalize(self, self._file.close)
        return self._file

    def start(self, header: SessionHeader, restored: Session | None = None) -> None:
        """Begin a session's autosave, replacing this saver's earlier one.
        `restored`: a session that goes on; its rounds are written first, as they were read."""
        self.session_id = None
        f = self._open()
        f.seek(0)
        f.truncate()
        rounds = rounds_text(restored) if restored is not None else ()
        for line in chain([dumps(header_to_json(header))], rounds):
            f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())  # the header on the disk at once
        self.session_id = header.session_id

    def add(self, rnd: Round) -> bool:
        """Append one round; False (nothing written) when not started or the round belongs
        to another session. Returns once the line is with the system (on the disk within
        SYNC_S)."""
        if self.session_id is None or rnd.session_id != self.session_id:
            return False
        f = self._file
        f.write(round_text(rnd) + "\n")
        f.flush()  # with the system now: an app that crashes loses nothing written
        if time.monotonic() - self._synced >= SYNC_S:
            os.fsync(f.fileno())  # on the disk: a power cut loses at most SYNC_S
            self._synced = time.monotonic()
        return True

    def finish(self) -> None:
        """The session ended cleanly (exported, reset, or the app closed): remove this
        saver's file (never another window's)."""
        self.session_id = None
        self.path.unlink(missing_ok=True)  # before the lock goes: never seen unlocked
        if self._file is not None:
            self._file.close()
            self._file = None

    def discard(self, path: str | os.PathLike[str] | None = None) -> None:
        """Throw an autosave away: `path`, one that find_all_restorable offered and the user
        declined; without it, this saver's own."""
        if path is None or Path(path) == self.path:
            self.finish()
        elif not _writer_alive(Path(path)):
            Path(path).unlink(missing_ok=True)

    def adopt(self, path: str | os.PathLike[str]) -> Session:
        """Restore a session that find_all_restorable offered, and make its file this
        saver's: removed when this saver finishes, replaced when it starts a session.
        Raises TraceError or OSError (the file then stays where it was)."""
        session = load(path)
        self.finish()
        private_folder(self.folder)
        os.replace(path, self.path)
        self._open()
        return session

    @staticmethod
    def find_all_restorable(folder: str | os.PathLike[str] | None = None) -> list[Path]:
        """Every autosave left by a run that is gone, newest first: a complete header and
        at least one round line, and no live writer. Reads two lines of each file."""
        folder = Path(folder).expanduser() if folder is not None else cache_folder()
        found = []
        for path in folder.glob(PATTERN):
            try:
                with open(path, "rb") as f:
                    first, second = f.readline(), f.readline()
                parse_header(_json_object(first))
                mtime = path.stat().st_mtime
            except (OSError, ValueError):
                continue  # unreadable, or not even a complete header: nothing to offer
            if second.strip() and not _writer_alive(path):
                found.append((mtime, path))
        return [path for _, path in sorted(found, reverse=True)]

    @staticmethod
    def find_restorable(folder: str | os.PathLike[str] | None = None) -> Path | None:
        """The newest of find_all_restorable(folder), or None."""
        found = Autosaver.find_all_restorable(folder)
        return found[0] if found else None

    @staticmethod
    def restore(path: str | os.PathLike[str]) -> Session:
        """The autosaved session: its complete rounds (a cut-off last line is dropped and
        noted in Session.warnings). Raises TraceError or OSError. (adopt() also takes
        the file over.)"""
        return load(path)


def _json_object(line: bytes) -> dict:
    obj = json.loads(line.decode("utf-8"))
    if not isinstance(obj, dict):
        raise TraceError("expected a JSON object", 1)
    return obj
