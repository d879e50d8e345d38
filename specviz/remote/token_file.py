"""Where the serve token lives: never on a command line (/proc/PID/cmdline is readable by
every local user), but in the environment ($SPECVIZ_TOKEN) or a file only its owner can
read (--token-file, mode 0600). `specviz serve` writes a new token to such a file and
prints the file's path, not the token.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from specviz.core import resources
from specviz.remote.protocol import new_token

MAX_TOKEN_BYTES = 4096
ARGV_REFUSED = (
    "--token puts the token on the command line, which every local user can read "
    "(/proc/PID/cmdline): give it in $SPECVIZ_TOKEN or in a file only you can read "
    "(--token-file PATH, chmod 600)"
)


class TokenError(ValueError):
    """A token file that cannot be used, with what to do about it."""


def read_token(path: str | os.PathLike[str]) -> str:
    """The token in `path`: a regular file of at most MAX_TOKEN_BYTES that only its owner
    can read or write (group and others: no access), its text stripped."""
    path = Path(path).expanduser()
    try:
        info = path.stat()
    except OSError as e:
        raise TokenError(f"--token-file {path}: {e.strerror or e}") from None
    if not stat.S_ISREG(info.st_mode):
        raise TokenError(f"--token-file {path}: not a regular file")
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        mode = stat.S_IMODE(info.st_mode)
        raise TokenError(
            f"--token-file {path}: mode {mode:o} lets other users read it; chmod 600 {path}"
        )
    if info.st_size > MAX_TOKEN_BYTES:
        raise TokenError(f"--token-file {path}: {info.st_size} bytes, not a token")
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise TokenError(f"--token-file {path}: cannot read it ({e})") from None
    if not token:
        raise TokenError(f"--token-file {path}: empty")
    return token


def write_new_token(path: str | os.PathLike[str] | None, port: int) -> tuple[str, Path]:
    """A new random token written to `path` (default: serve-PORT.token in the cache, a 0700
    folder), created 0600 (an existing file is replaced): (token, path)."""
    if path is None:
        folder = resources.cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        path = folder / f"serve-{port}.token"
    path = Path(path).expanduser()
    token = new_token()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(token + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return token, path


def client_token(token_file: str | None) -> str | None:
    """A client's token: --token-file, else $SPECVIZ_TOKEN, else None (TokenError for a
    file that cannot be used)."""
    if token_file:
        return read_token(token_file)
    return os.environ.get("SPECVIZ_TOKEN") or None
