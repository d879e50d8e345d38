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
import time
from collections.abc import Callable, Sequence

from specviz.core.engine.threads import default_threads
from specviz.remote.client import Cancelled
from specviz.remote.protocol import ConnectionLost, new_token

READY = "specviz serve: listening on "


def engine_threads() -> int:
    """torch threads for a window's engine process: one per core but one, left to the window
    (core.engine.threads says why)."""
    return default_threads()


class ChildServer:
    """A `specviz serve` child process: its address and token once it listens."""

    def __init__(
        self,
        target: str,
        draft: str,
        extra_args: Sequence[str] = (),
        timeout: float = 600.0,
        cancel: Callable[[], bool] | None = None,
    ):
        self.token = new_token()
        command = [sys.executable, "-m", "specviz", "serve", "--target", target, "--draft", draft]
        self.proc = subprocess.Popen(
            [*command, "--port", "0", "--stop-with-stdin", *extra_args],
            stdin=subprocess.PIPE,  # never written: if this process dies, the child sees EOF
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "SPECVIZ_TOKEN": self.token},
        )
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
                        raise ConnectionLost(
                            f"the engine process ended (exit code {code}) before it was ready; "
                            "its messages are above"
                        )
        raise ConnectionLost(f"the engine process was not ready within {timeout:g} s")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (the server ends its loop within a moment), then SIGKILL."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stdin.close()
