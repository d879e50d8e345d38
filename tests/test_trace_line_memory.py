"""Issue 48: reading a trace line costs a small multiple of its size, in `inspect` (the
stream), a replay (load, then every round's details, as the window asks) alike; a line
that would cost more is refused, its size named. Peak memory is measured in a fresh
interpreter, above its own level once everything is imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from specviz.core.trace.serialize import dumps
from tests.fixtures import synthetic_lines

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import contextlib, io, json, resource, sys
from specviz.cli.main import main
from specviz.core.trace import check_session, files
import specviz.cli.inspect, specviz.cli.terminal, specviz.core.metrics.registry
import specviz.core.metrics.running, specviz.core.metrics.whatif, specviz.core.trace.tempfiles

def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))

try:  # the high-water mark from here on
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base, peak = status("VmRSS:"), lambda: status("VmHWM:")
except OSError:
    base, peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, lambda: (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
mode, path = sys.argv[1], sys.argv[2]
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    if mode == "inspect":
        code = main(["inspect", path])
    else:  # a replay: the window loads the trace and asks for each round's details
        session = files.load(path)
        for index in range(len(session.rounds)):
            session.details(index)
        code = 0
print(json.dumps({"grew": peak() - base, "code": code, "err": err.getvalue()}))
"""


def _read(mode: str, path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _longest(path: Path) -> int:
    with open(path, "rb") as f:
        return max(map(len, f))


def test_a_5_mb_round_line_costs_under_10_times_its_size(tmp_path):
    """One round at K=32 with top-N lists of 3500 entries (more than the app keeps, for a
    5 MB line; the check says so, the reading is what is measured). Before issue 48 it took
    11x (inspect) and 10x (replay); a line of shorter entries 36x."""
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(synthetic_lines(1, k=32, top_n=3500)) + "\n", encoding="utf-8")
    size = _longest(path)
    assert size > 4_500_000
    for mode in ("inspect", "replay"):
        result = _read(mode, path)
        assert result["grew"] < 10 * size, (mode, result["grew"] / size)
        assert "Traceback" not in result["err"]


def test_a_line_that_would_cost_more_is_refused_with_its_size(tmp_path):
    """A round line of 5 MB whose tokens hold short entries ([1,0,0], 8 bytes for a tuple
    and its three slots): refused, its size named, in one line and exit code 2."""
    lines = list(synthetic_lines(1, k=4, top_n=20))
    rnd = json.loads(lines[1])
    rnd["tokens"] = [{"id": 1, "text": "a", "status": "accepted", "top": [[1, 0, 0]] * 1000}] * 650
    path = tmp_path / "dense.jsonl"
    path.write_text(lines[0] + "\n" + dumps(rnd) + "\n", encoding="utf-8")
    size = _longest(path)
    result = _read("inspect", path)
    assert result["code"] == 2
    message = result["err"].strip()
    assert len(message.splitlines()) == 1, message
    assert f"line 2: a line of {size / 1e6:.1f} MB that would take more than" in message
    assert result["grew"] < 10 * size


def test_details_refuses_what_load_deferred(tmp_path):
    """Load reads a round line without its top-N lists; asking for them (the window's
    distribution view) reads them within the same budget, or names the line."""
    import pytest

    from specviz.core.trace import files

    lines = list(synthetic_lines(1, k=4, top_n=20))
    rnd = json.loads(lines[1])
    rnd["tokens"] = [{"id": 1, "text": "a", "status": "accepted", "top": [[1, 0, 0]] * 1000}] * 650
    path = tmp_path / "dense.jsonl"
    path.write_text(lines[0] + "\n" + dumps(rnd) + "\n", encoding="utf-8")
    session = files.load(path)
    with pytest.raises(files.TraceError, match="line 2: a line of 5.2 MB that would take"):
        session.details(0)
