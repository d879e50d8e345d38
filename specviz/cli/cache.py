"""`specviz cache`: what specviz keeps in its cache folder ($SPECVIZ_CACHE, else
~/.cache/specviz), each entry's kind and size and the total; `--clear [WHAT]` removes them
(all, a kind, or one entry), without asking, and says what it removed."""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from specviz.cli.options import fail
from specviz.cli.terminal import printable

# Each kind: the names its writers give their entries, at the top of the cache folder.
KINDS = {
    "models": ("smollm2-*",),  # core.models.smollm2: builtin:smollm2, converted
    "probes": ("dtype-probe.json",),  # core.models.dtype_probe: --dtype auto's probes
    "suffix": ("suffix",),  # core.drafters.suffix: earlier outputs, per target
    "autosaves": ("autosave*.jsonl",),  # core.trace.autosave: the window's sessions
    "tokens": ("serve-*.token",),  # remote.token_file: `specviz serve`'s tokens
    "training": ("train*", "checkpoint*", "head-*"),  # training data and checkpoints
}
LABELS = {
    "models": "converted model", "probes": "dtype probes", "suffix": "suffix cache",
    "autosaves": "autosave", "tokens": "serve token", "training": "training",
    "other": "other",
}  # fmt: skip


@dataclass(frozen=True)
class Entry:
    """One file or folder at the top of the cache folder."""

    path: Path
    kind: str  # a key of KINDS, or "other"
    size: int  # bytes, a folder's files summed (links not followed)


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "cache", help="list (or clear) what specviz keeps in its cache folder", description=__doc__
    )
    parser.add_argument(
        "--clear",
        nargs="?",
        const="all",
        metavar="WHAT",
        help=f"remove, without asking: all (the default), a kind ({', '.join(KINDS)}, other), "
        "or one entry (its name, or a path inside the cache folder)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def kind_of(name: str) -> str:
    for kind, patterns in KINDS.items():
        if any(fnmatch.fnmatchcase(name, p) for p in patterns):
            return kind
    return "other"


def size_of(path: Path) -> int:
    """A file's size, or a folder's files' sizes summed; links are counted, not followed."""
    try:
        if path.is_symlink() or not path.is_dir():
            return path.lstat().st_size
    except OSError:
        return 0
    total = 0
    for folder, _, files in os.walk(path, onerror=lambda e: None):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


def entries(folder: Path) -> list[Entry]:
    """The cache folder's entries, by kind then name; none if it does not exist."""
    try:
        paths = sorted(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = [Entry(p, kind_of(p.name), size_of(p)) for p in paths]
    order = list(LABELS)
    return sorted(found, key=lambda e: (order.index(e.kind), e.path.name))


def human(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return ""  # not reached


def _count(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


class BadWhat(ValueError):
    """--clear names nothing in the cache folder."""


def chosen(folder: Path, what: str) -> list[Entry]:
    """The entries `--clear WHAT` removes: all, a kind, or one entry (a name in the cache
    folder, or a path inside it); BadWhat for a path outside it or nothing there."""
    found = entries(folder)
    if what == "all":
        return found
    if what in LABELS:
        return [e for e in found if e.kind == what]
    path = Path(what).expanduser()
    if os.sep not in what and not (folder / path).exists() and not (folder / path).is_symlink():
        kinds = ", ".join([*LABELS, "all"])
        raise BadWhat(f"{what}: no such entry in the cache folder {folder} (kinds: {kinds})")
    if not path.is_absolute() and ((folder / path).exists() or (folder / path).is_symlink()):
        path = folder / path
    # the folder holding it, links resolved; the entry itself is never followed
    home = folder.resolve()
    where = path.parent.resolve() / path.name
    if where == home:
        return found
    if home not in where.parents:
        raise BadWhat(f"{what} is not inside the cache folder {folder}: nothing removed")
    top = home / where.relative_to(home).parts[0]
    if not (top.exists() or top.is_symlink()):
        raise BadWhat(f"{what}: no such entry in the cache folder {folder}")
    if top != where:  # a file deep in an entry: that file (or folder) alone
        if not (where.exists() or where.is_symlink()):
            raise BadWhat(f"{what}: no such entry in the cache folder {folder}")
        return [Entry(where, kind_of(top.name), size_of(where))]
    return [e for e in found if e.path.name == top.name]


def remove(entry: Entry) -> str | None:
    """Remove one entry (a link itself, never what it points to); why not, or None."""
    try:
        if entry.path.is_dir() and not entry.path.is_symlink():
            shutil.rmtree(entry.path)
        else:
            entry.path.unlink()
    except OSError as e:
        return e.strerror or str(e)
    return None


def run(args: argparse.Namespace) -> int:
    from specviz.core.resources import cache_dir

    folder = cache_dir()
    if args.clear is not None:
        try:
            doomed = chosen(folder, args.clear)
        except BadWhat as e:
            return fail(str(e))
        return _clear(folder, doomed, args.json)
    found = entries(folder)
    total = sum(e.size for e in found)
    if args.json:
        rows = [{"kind": e.kind, "path": str(e.path), "bytes": e.size} for e in found]
        print(json.dumps({"folder": str(folder), "entries": rows, "total_bytes": total}))
        return 0
    print(f"cache folder  {printable(folder, keep_lines=False)}")
    if not found:
        print("(empty)" if folder.is_dir() else "(not made yet: nothing cached)")
        return 0
    for e in found:
        name = printable(e.path.name, keep_lines=False)
        print(f"{LABELS[e.kind]:<16} {human(e.size):>9}  {name}")
    print(f"{'total':<16} {human(total):>9}  ({_count(len(found))})")
    return 0


def _clear(folder: Path, doomed: list[Entry], as_json: bool) -> int:
    """Remove `doomed` and say what went: 0, or 1 if an entry could not be removed."""
    removed, failed = [], []
    for e in doomed:
        why = remove(e)
        (removed if why is None else failed).append((e, why))
    if as_json:
        rows = [{"kind": e.kind, "path": str(e.path), "bytes": e.size} for e, _ in removed]
        bad = [{"path": str(e.path), "error": why} for e, why in failed]
        print(json.dumps({"folder": str(folder), "removed": rows, "failed": bad}))
    else:
        for e, _ in removed:
            path = printable(e.path, keep_lines=False)
            print(f"removed {LABELS[e.kind]:<16} {human(e.size):>9}  {path}")
        freed = sum(e.size for e, _ in removed)
        print(f"removed {_count(len(removed))}, {human(freed)}" if removed else "nothing to remove")
    for e, why in failed:
        fail(f"cannot remove {e.path}: {why}")
    return 1 if failed else 0
