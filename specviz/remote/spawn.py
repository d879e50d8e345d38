"""An engine in a child process (`--engine process`): `specviz serve --port 0` started with a
fresh token in its environment, on 127.0.0.1, stopped with its parent's session, and by
itself when its parent dies (its stdin, a pipe from the parent, closes).

The window and the engine then stop sharing one interpreter, and the window talks to the
child exactly as to a remote server (the same protocol, the same RemoteEngine).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from specviz.core.engine.threads import default_threads
from specviz.remote.client import Cancelled
from specviz.remote.protocol import ConnectionLost, new_token

READY = "specviz serve: listening on "


def engine_threads() -> int:
    """torch threads for a window's engine process: one per core but one, left to the window
    (core.engine.threads says why)."""
    return default_threads()


# The child's last stderr lines kept to quote when it ends before it is ready.
STDERR_KEPT = 12


class ChildServer:
    """A `specviz serve` child process: its address and token once it listens.

    draft "" (or None): the target alone, for a drafter that needs no draft model; then
    extra_args must name such a drafter (`--drafter lookup`, ...), or the child refuses to
    start without a draft. The child's stderr is passed on to this process's and its last
    lines are kept (`messages`) to quote if it ends before it is ready: a window user may
    have no terminal."""

    def __init__(
        self,
        target: str,
        draft: str | None,
        extra_args: Sequence[str] = (),
        timeout: float = 600.0,
        cancel: Callable[[], bool] | None = None,
    ):
        self.token = new_token()
        command = [sys.executable, "-m", "specviz", "serve", "--target", target]
        if draft:
            command += ["--draft", draft]
        self.messages: deque[str] = deque(maxlen=STDERR_KEPT)
        self.proc = subprocess.Popen(
            [*command, "--port", "0", "--stop-with-stdin", *extra_args],
            stdin=subprocess.PIPE,  # never written: if this process dies, the child sees EOF
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env={**os.environ, "SPECVIZ_TOKEN": self.token},
        )
        self._relay = threading.Thread(target=self._pass_stderr, daemon=True, name="serve-stderr")
        self._relay.start()
        try:
            self.address = self._wait_ready(timeout, cancel)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, timeout: float, cancel: Callable[[], bool] | None) -> str:
        """The address from the child's first line, its model load included."""
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if cancel is not None and cancel():
                    raise Cancelled()  # the window is closing: nothing to report
                if selector.select(0.1):
                    line = self.proc.stdout.readline()
                    if line.startswith(READY):
                        return line[len(READY) :].strip()
                    if not line:
                        code = self.proc.wait()
                        self._relay.join(2.0)  # its last words, read to the end
                        raise ConnectionLost(
                            f"the engine process ended (exit code {code}) before it was ready"
                            + self._quoted()
                        )
        raise ConnectionLost(f"the engine process was not ready within {timeout:g} s")

    def _pass_stderr(self) -> None:
        """On a thread: each line of the child's stderr to ours, the last ones kept."""
        for line in self.proc.stderr:
            self.messages.append(line.rstrip("\n"))
            try:
                sys.stderr.write(line)
                sys.stderr.flush()
            except (OSError, ValueError):  # our stderr closed: keep reading, or the child blocks
                pass

    def _quoted(self) -> str:
        """': ' and the child's error lines (else its last lines), or '' if it said nothing."""
        lines = [m for m in self.messages if m.strip()]
        errors = [m for m in lines if "error" in m.lower()]
        said = (errors or lines)[-4:]
        return (": " + " / ".join(said)) if said else " (it printed nothing)"

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (the server ends its loop within a moment), then SIGKILL."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._relay.join(2.0)
        self.proc.stdout.close()
        self.proc.stdin.close()
        if not self._relay.is_alive():  # read to its end (a grandchild may hold it open)
            self.proc.stderr.close()
