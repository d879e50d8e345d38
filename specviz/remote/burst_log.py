"""A log that says a repeated thing once per interval: a flood of bad requests (a wrong
token sent thousands of times a second) costs the server one line per burst, not one per
request, and still says how many it did not repeat."""

from __future__ import annotations

import time
from collections.abc import Callable

LOG_EVERY_S = 5.0


class BurstLog:
    def __init__(self, log: Callable[[str], None], every_s: float = LOG_EVERY_S):
        self.log, self.every_s = log, every_s
        self._seen: dict[str, tuple[float, int]] = {}  # kind: (last logged, not logged since)

    def __call__(self, kind: str, message: str) -> None:
        now = time.monotonic()
        last, count = self._seen.get(kind, (None, 0))
        if last is not None and now - last < self.every_s:
            self._seen[kind] = (last, count + 1)
            return
        more = f" (and {count} more like it in the last {now - last:.0f} s)" if count else ""
        self.log(message + more)
        self._seen[kind] = (now, 0)
