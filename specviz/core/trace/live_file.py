"""A trace written while the session runs, so that a killed `specviz run --trace` keeps
its rounds.

The rounds go to `<stem>.partial<suffix>` next to the trace asked for (`t.jsonl` ->
`t.partial.jsonl`), a flushed line a round (on the disk at least every SYNC_S), as the
autosave writes. finish() adds the summary and moves the file onto the asked-for name;
a file that appeared there meanwhile is kept unless force, and the trace stays under its
partial name. A kill leaves the partial file: an ordinary trace without its summary line,
which `specviz inspect` and the window read.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

from specviz.core.trace.files import round_text
from specviz.core.trace.records import Round, SessionHeader
from specviz.core.trace.serialize import dumps, header_to_json
from specviz.core.trace.session import Session
from specviz.core.trace.tempfiles import remove_stale_temps

SYNC_S = 1.0  # as the autosave: a crash of the process loses nothing the system has


def partial_path(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    return path.with_name(f"{path.stem}.partial{path.suffix}")


def check_target(path: str | os.PathLike[str], force: bool = False) -> Path:
    """Fail early, before any model is loaded, if a trace cannot be written to path.
    Raises OSError subclasses with a message a user can act on."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; give a file name for the trace")
    if path.exists() and not force:
        raise FileExistsError(f"{path} already exists (use --force to overwrite it)")
    folder = path.parent
    if not folder.is_dir():
        raise FileNotFoundError(f"folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise PermissionError(f"cannot write to folder {folder}")
    partial = partial_path(path)
    if partial.exists() and not force:
        raise FileExistsError(
            f"{partial} exists (the rounds of an earlier run that did not finish?): look at "
            "it with `specviz inspect`, move it away, or use --force to replace it"
        )
    return path


class LiveTrace:
    """Appends a running session to the partial file; publishes it at the end."""

    def __init__(self, path: str | os.PathLike[str], force: bool = False):
        self.path = Path(path)
        self.partial = partial_path(self.path)
        self.force = force
        self._file = None
        self._synced = 0.0

    def start(self, header: SessionHeader) -> None:
        remove_stale_temps(self.path.parent)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if self.force else os.O_EXCL)
        try:
            fd = os.open(self.partial, flags, 0o666)
        except FileExistsError:
            raise FileExistsError(
                f"{self.partial} was created by something else (another run?); use --force "
                "to replace it"
            ) from None
        self._file = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        self._write(dumps(header_to_json(header)), sync=True)

    def add(self, rnd: Round) -> None:
        self._write(round_text(rnd), sync=time.monotonic() - self._synced >= SYNC_S)

    def _write(self, line: str, sync: bool) -> None:
        self._file.write(line + "\n")
        self._file.flush()  # with the system: a killed process loses nothing written
        if sync:
            os.fsync(self._file.fileno())
            self._synced = time.monotonic()

    def close(self) -> None:
        """Stop writing, leaving the partial file where it is."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def finish(self, session: Session, summary: dict | None = None) -> Path:
        """Add the summary line (given by the caller: core.metrics computes it) and move the
        trace onto its name; the path written.
        FileExistsError (the trace kept under its partial name) if a file appeared at the
        name during the run and force is off."""
        if summary is not None and session.rounds:
            self._write(dumps({"type": "summary", **summary}), sync=True)
        else:
            os.fsync(self._file.fileno())
        self.close()
        if self.force:
            os.replace(self.partial, self.path)
            return self.path
        try:
            os.link(self.partial, self.path)  # never replaces: fails if the name is taken
        except FileExistsError:
            raise FileExistsError(
                f"{self.path} was created while the run was going and is left as it is; "
                f"this run's trace is {self.partial} (use --force to overwrite)"
            ) from None
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            if self.path.exists():  # a file system without hard links: check, then rename
                raise FileExistsError(
                    f"{self.path} was created while the run was going and is left as it is; "
                    f"this run's trace is {self.partial} (use --force to overwrite)"
                ) from None
            os.replace(self.partial, self.path)
            return self.path
        self.partial.unlink()
        return self.path
