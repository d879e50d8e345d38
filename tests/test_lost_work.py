"""Nothing lost (issue 14): a killed `specviz run --trace` keeps its rounds, a killed save
leaves no temporary that stays forever, a file that appears at the trace path during a run
is not overwritten."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from specviz.core.trace import tempfiles
from specviz.core.trace.files import load, save, write_atomic
from specviz.core.trace.live_file import LiveTrace, check_target, partial_path
from tests.fixtures import all_details, synthetic_session

REPO = Path(__file__).resolve().parents[1]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid  # gone (and reaped): no process has this id for a while


def test_partial_name_sits_next_to_the_trace(tmp_path):
    assert partial_path(tmp_path / "t.jsonl") == tmp_path / "t.partial.jsonl"
    assert partial_path(tmp_path / "t") == tmp_path / "t.partial"


# `python -m specviz` with Ctrl-C as a terminal delivers it: a suite started as a background
# job (`make test &`) runs with SIGINT ignored, which its children inherit.
AS_FROM_A_TERMINAL = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'specviz'; runpy.run_module('specviz', run_name='__main__', alter_sys=True)"
)


def _run_until_rounds(trace: Path, pair_dirs, rounds: int = 3) -> subprocess.Popen:
    """`specviz run --trace trace` in a child process, once `rounds` rounds are written."""
    cmd = [
        sys.executable, "-c", AS_FROM_A_TERMINAL, "run", "--target", str(pair_dirs[0]),
        "--draft", str(pair_dirs[1]), "--prompt", "In the beginning", "--k", "2",
        "--max-new-tokens", "200", "--trace", str(trace), "--quiet",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    partial = partial_path(trace)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if partial.exists() and partial.read_bytes().count(b"\n") > rounds:
            break  # the header and the rounds are with the system
        time.sleep(0.01)
    return proc


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killed_or_interrupted_run_keeps_its_rounds(tmp_path, pair_dirs, sig):
    trace = tmp_path / "new.jsonl"
    proc = _run_until_rounds(trace, pair_dirs)
    try:
        assert proc.poll() is None, "the run ended before it could be stopped"
        os.kill(proc.pid, sig)
        proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.wait()
        err = proc.stderr.read().decode()
        proc.stderr.close()
    if sig == signal.SIGKILL:  # kill -9: the rounds so far, in the partial file
        assert not trace.exists()  # never a half trace under the asked-for name
        session = load(partial_path(trace))  # an ordinary trace without its summary line
    else:  # Ctrl-C: the trace is finished and moved onto its name
        assert proc.returncode == 130 and "Traceback" not in err, err
        assert not partial_path(trace).exists()
        session = load(trace)
    assert len(session.rounds) >= 3
    assert session.header.prompt == "In the beginning"


def test_finish_moves_the_partial_onto_the_name(tmp_path):
    session = synthetic_session(3)
    live = LiveTrace(tmp_path / "t.jsonl")
    live.start(session.header)
    for rnd in session.rounds:
        live.add(rnd)
    assert live.finish(session) == tmp_path / "t.jsonl"
    assert not live.partial.exists()
    assert all_details(load(tmp_path / "t.jsonl")) == session.rounds


def test_a_file_created_during_the_run_is_not_overwritten(tmp_path):
    session = synthetic_session(2)
    target = tmp_path / "t.jsonl"
    check_target(target)  # free when the run starts
    live = LiveTrace(target)
    live.start(session.header)
    live.add(session.rounds[0])
    target.write_text("someone else's file")  # appears while the run goes on
    with pytest.raises(FileExistsError, match="created while the run was going"):
        live.finish(session)
    assert target.read_text() == "someone else's file"
    assert all_details(load(live.partial)) == session.rounds[:1]  # the run's trace, kept
    # with --force it is replaced
    live = LiveTrace(target, force=True)
    live.start(session.header)
    live.finish(session)
    assert load(target).header == session.header


def test_an_earlier_partial_file_is_not_clobbered(tmp_path):
    target = tmp_path / "t.jsonl"
    partial_path(target).write_text("rounds of a killed run")
    with pytest.raises(FileExistsError, match="did not finish"):
        check_target(target)
    check_target(target, force=True)


def test_stale_temporary_of_a_killed_save_is_removed_by_the_next_write(tmp_path):
    dead = tmp_path / f".t.jsonl.specviz-{_dead_pid()}-abcd1234.tmp"
    dead.write_text('{"type": "session"}\n' * 1000)  # a kill during the final save
    live_pid = tmp_path / f".u.jsonl.specviz-{os.getppid()}-abcd1234.tmp"
    live_pid.write_text("a save going on in a live process")
    mine = tmp_path / f".v.jsonl.specviz-{os.getpid()}-abcd1234.tmp"
    mine.write_text("this process's own save, on another thread")
    other = tmp_path / ".notes.txt.abcd1234.tmp"
    other.write_text("not ours: another program's temporary")
    save(synthetic_session(1), tmp_path / "next.jsonl")
    assert not dead.exists()
    assert live_pid.exists() and mine.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == sorted(
        [live_pid.name, mine.name, other.name]
    )


def test_old_style_temporaries_are_removed_only_when_old_and_a_trace(tmp_path):
    old = tmp_path / ".t.jsonl.k3j9x_2a.tmp"  # mkstemp's name, before the pid was in it
    old.write_text('{"type": "session", "schema": "specviz.trace/1"}\n')
    fresh = tmp_path / ".u.jsonl.q8w7e6r5.tmp"
    fresh.write_text('{"type": "session", "schema": "specviz.trace/1"}\n')
    foreign = tmp_path / ".w.jsonl.z1x2c3v4.tmp"
    foreign.write_text("not a trace")
    hour_ago = time.time() - tempfiles.LEGACY_STALE_S - 60
    for path in (old, foreign):
        os.utime(path, (hour_ago, hour_ago))
    assert tempfiles.remove_stale_temps(tmp_path) == [old]
    assert fresh.exists() and foreign.exists()


def test_inspect_removes_stale_temporaries(tmp_path, capsys):
    from specviz.cli.main import main

    trace = tmp_path / "t.jsonl"
    save(synthetic_session(2), trace)
    dead = tmp_path / f".t.jsonl.specviz-{_dead_pid()}-abcd1234.tmp"
    dead.write_text("cut")
    assert main(["inspect", str(trace)]) == 0
    assert not dead.exists()


def test_atomic_write_names_its_temporary_with_the_pid(tmp_path, monkeypatch):
    names = []
    real = tempfile.mkstemp
    monkeypatch.setattr(
        tempfile, "mkstemp", lambda **kw: (names.append(kw["prefix"]), real(**kw))[1]
    )
    write_atomic(tmp_path / "t.jsonl", ["{}"])
    assert names == [f".t.jsonl.specviz-{os.getpid()}-"]
