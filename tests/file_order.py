"""The order the two workers take the test files in: the costliest first.

`make test` hands out whole files (`--dist loadfile`), each to the worker that is free. Taken in
xdist's default order (most tests first), the few-test files that start a model in a child
process (the README's commands, tensor parallelism) came last, and one worker ran the tail
alone. Taken costliest first, the last files are short ones and the two finish together
(longest-processing-time-first, Graham 1969).

The costs are the seconds each file took in a measured run (`tests/durations.json`; a file not
in it counts as the median). `make test PYTEST_ARGS=--write-durations` measures them again.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

DURATIONS = Path(__file__).with_name("durations.json")


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def read_costs(path: Path = DURATIONS) -> dict[str, float]:
    """{test file: seconds}; {} when the file is absent or not such a mapping."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, int | float)}


def costliest_first(items: list, costs: dict[str, float]) -> None:
    """Reorder the collected items in place: files by cost, descending (the median for a
    file without one), each file's own items in their collected order."""
    default = statistics.median(costs.values()) if costs else 0.0
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(file_of(item.nodeid), len(first_seen))

    def key(item) -> tuple[float, int]:
        name = file_of(item.nodeid)
        return -costs.get(name, default), first_seen[name]

    items.sort(key=key)  # stable: a file's items keep their order


class DurationRecorder:
    """Sums each file's setup, call and teardown seconds as the reports arrive (on the
    controller, from every worker) and writes them as durations.json at the end."""

    def __init__(self, path: Path = DURATIONS):
        self.path = path
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report) -> None:
        self.seconds[file_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session) -> None:
        if hasattr(session.config, "workerinput"):  # a worker: the controller writes
            return
        ordered = dict(sorted(((k, round(v, 1)) for k, v in self.seconds.items()),
                              key=lambda kv: -kv[1]))  # fmt: skip
        self.path.write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")
