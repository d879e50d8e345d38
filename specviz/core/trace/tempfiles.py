"""Temporary files that specviz writes next to a target file, and the removal of those
that a killed process left behind.

An atomic write goes through `.<name>.specviz-<pid>-<random>.tmp` in the target's folder.
A kill during the write leaves that file (as large as the trace), so the next write to the
folder and `specviz inspect` remove the ones that are stale: ours by name, and written by a
process that is no longer alive on this machine. A temporary of a live process is never
touched, whatever its age. Temporaries of older versions (`.<name>.<random>.tmp`, no pid)
are ours when they start as a trace does, and stale an hour after their last write.

(A folder shared between machines over a network is the one case the pid check cannot
judge: another machine's live writer has a pid that means nothing here.)
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

TAG = "specviz"
_OURS = re.compile(rf"\..+\.{TAG}-(\d+)-[A-Za-z0-9_]+\.tmp")
_LEGACY = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")  # tempfile.mkstemp's names, before the pid
LEGACY_STALE_S = 3600.0


def temp_prefix(target: str | os.PathLike[str]) -> str:
    """The prefix for tempfile.mkstemp(prefix=..., suffix=".tmp") of a write to target."""
    return f".{Path(target).name}.{TAG}-{os.getpid()}-"


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def _looks_like_trace(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            start = f.read(64)
    except OSError:
        return False
    return start.startswith(b'{"type"') and b'"session"' in start


def is_stale(path: Path, now: float | None = None) -> bool:
    """Whether `path` is a temporary file of ours that nothing will finish."""
    name = path.name
    match = _OURS.fullmatch(name)
    if match:
        pid = int(match.group(1))
        return pid != os.getpid() and not pid_alive(pid)
    if _LEGACY.fullmatch(name) and _looks_like_trace(path):
        try:
            age = (now or time.time()) - path.stat().st_mtime
        except OSError:
            return False
        return age > LEGACY_STALE_S
    return False


def remove_stale_temps(folder: str | os.PathLike[str]) -> list[Path]:
    """Remove the stale temporaries in folder; the paths removed. Never raises."""
    removed = []
    try:
        candidates = [p for p in Path(folder).glob(".*.tmp") if p.is_file()]
    except OSError:
        return removed
    now = time.time()
    for path in candidates:
        if is_stale(path, now):
            try:
                path.unlink()
                removed.append(path)
            except OSError:
                pass  # gone already, or not ours to remove after all
    return removed
