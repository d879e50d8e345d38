"""Autosave: one fsync'ed line per round; a crash loses at most the round being written; the
next launch finds the file and restores the session from it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specviz.core.trace import autosave
from specviz.core.trace.autosave import FILENAME, Autosaver, cache_folder
from tests.fixtures import all_details, synthetic_session


def test_folder_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    assert cache_folder() == tmp_path / "cache"
    assert Autosaver().path.parent == tmp_path / "cache"
    monkeypatch.setenv("SPECVIZ_CACHE", "~/elsewhere")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_folder() == tmp_path / "elsewhere"  # ~ expanded, as for the smollm2 cache
    monkeypatch.delenv("SPECVIZ_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_folder() == tmp_path / ".cache" / "specviz"


def test_each_round_is_saved_before_add_returns(tmp_path, monkeypatch):
    session = synthetic_session(6)
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(autosave.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    clock = [1000.0]
    monkeypatch.setattr(autosave.time, "monotonic", lambda: clock[0])
    saver = Autosaver(tmp_path / "cache")  # created on start
    saver.start(session.header)
    assert synced  # the header too
    fsyncs = []
    for n, rnd in enumerate(session.rounds, start=1):
        before = len(synced)
        assert saver.add(rnd)
        fsyncs.append(len(synced) - before)
        # What a crash of the app right now would leave: the header and every round so far.
        assert all_details(Autosaver.restore(saver.path)) == session.rounds[:n]
        clock[0] += 0.4
    # on the disk at least every SYNC_S (1 s): rounds 1, 4 (1.2 s later)
    assert fsyncs == [1, 0, 0, 1, 0, 0]
    assert Autosaver.find_restorable(tmp_path / "cache") == saver.path
    saver.finish()


def test_crash_mid_round_loses_only_that_round(tmp_path):
    session = synthetic_session(5)
    saver = Autosaver(tmp_path)
    saver.start(session.header)
    for rnd in session.rounds[:4]:
        saver.add(rnd)
    # The app dies while writing round 4: part of its line reached the disk.
    with open(saver.path, "a", encoding="utf-8") as f:
        f.write('{"type":"round","index":4,"context_len":2')
    found = Autosaver.find_restorable(tmp_path)
    assert found == saver.path
    restored = Autosaver.restore(found)
    assert restored.header == session.header
    assert all_details(restored) == session.rounds[:4]
    assert "cut-off last line" in restored.warnings[0]


def test_nothing_to_restore(tmp_path):
    assert Autosaver.find_restorable(tmp_path) is None  # no file
    saver = Autosaver(tmp_path)
    saver.start(synthetic_session(1).header)
    assert Autosaver.find_restorable(tmp_path) is None  # a header and no round yet
    saver.path.write_text('{"type": "session", "sch')  # a cut-off header
    assert Autosaver.find_restorable(tmp_path) is None
    (tmp_path / FILENAME).write_bytes(b"\xff\xfe\0garbage\n{}\n")
    assert Autosaver.find_restorable(tmp_path) is None


def test_finish_and_discard_remove_the_file(tmp_path):
    session = synthetic_session(2)
    saver = Autosaver(tmp_path)
    saver.start(session.header)
    saver.add(session.rounds[0])
    saver.finish()
    assert not saver.path.exists() and not saver.active
    assert not saver.add(session.rounds[1])  # not started: nothing written
    saver.start(session.header)
    saver.discard()
    assert Autosaver.find_restorable(tmp_path) is None
    saver.discard()  # twice is fine


def test_rounds_of_another_session_are_dropped(tmp_path):
    first, second = synthetic_session(2), synthetic_session(2)
    second = type(second)(
        second.header.__class__(**{**second.header.__dict__, "session_id": "other"}), []
    )
    saver = Autosaver(tmp_path)
    saver.start(second.header)
    assert not saver.add(first.rounds[0])
    assert Autosaver.find_restorable(tmp_path) is None


def test_a_new_session_replaces_the_old_autosave(tmp_path):
    old, new = synthetic_session(3, seed=1), synthetic_session(2, seed=2)
    saver = Autosaver(tmp_path)
    saver.start(old.header)
    for rnd in old.rounds:
        saver.add(rnd)
    saver.start(new.header)
    saver.add(new.rounds[0])
    assert all_details(Autosaver.restore(saver.path)) == new.rounds[:1]
    saver.finish()


def test_disk_errors_reach_the_caller(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    with pytest.raises(OSError):
        Autosaver(blocker).start(synthetic_session(1).header)


def test_a_restored_session_goes_on(tmp_path):
    session = synthetic_session(5)
    saver = Autosaver(tmp_path)
    saver.start(session.header)
    for rnd in session.rounds[:3]:
        saver.add(rnd)
    lines = saver.path.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2][:-1] + ',"from_a_newer_version":1}'
    saver.path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    restored = Autosaver.restore(saver.path)
    saver.start(restored.header, restored)  # the restored rounds' lines, as they were read
    saver.add(session.rounds[3])
    assert saver.path.read_text(encoding="utf-8").splitlines()[:4] == lines
    assert all_details(Autosaver.restore(saver.path)) == session.rounds[:4]
    saver.finish()


OTHER_WINDOW = """
import sys, time
from specviz.core.trace.autosave import Autosaver
from tests.fixtures import synthetic_session
session = synthetic_session(2, seed=5)
saver = Autosaver(sys.argv[1])
saver.start(session.header)
saver.add(session.rounds[0])
print(saver.path, flush=True)
time.sleep(120)
"""


def test_two_windows_never_share_an_autosave(tmp_path):
    repo = Path(__file__).resolve().parents[1]
    other = subprocess.Popen(
        [sys.executable, "-c", OTHER_WINDOW, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=repo,
    )
    try:
        theirs = Path(other.stdout.readline().strip())
        assert theirs.is_file()
        session = synthetic_session(3)
        mine = Autosaver(tmp_path)
        mine.start(session.header)
        mine.add(session.rounds[0])
        assert mine.path != theirs
        # A window that is still open is not offered back, nor thrown away.
        assert theirs not in Autosaver.find_all_restorable(tmp_path)
        mine.discard(theirs)
        mine.finish()  # a clean close removes only its own file
        assert theirs.is_file() and not mine.path.exists()
    finally:
        other.kill()  # as kill -9: no clean close
        other.wait()
        other.stdout.close()
    assert Autosaver.find_all_restorable(tmp_path) == [theirs]


def test_restore_offers_each_autosave_left(tmp_path):
    sessions = [synthetic_session(2, seed=s) for s in (1, 2)]
    paths = []
    for session in sessions:
        saver = Autosaver(tmp_path)
        saver.start(session.header)
        saver.add(session.rounds[0])
        paths.append(saver.path)
        del saver  # a crash: the file stays
    found = Autosaver.find_all_restorable(tmp_path)
    assert sorted(found) == sorted(paths)
    window = Autosaver(tmp_path)
    restored = window.adopt(found[0])
    assert restored.header.session_id in {s.header.session_id for s in sessions}
    assert not found[0].exists() and window.path.exists()  # the window's own file now
    window.finish()
    assert Autosaver.find_all_restorable(tmp_path) == [found[1]]  # the other still offered
    window.discard(found[1])
    assert Autosaver.find_all_restorable(tmp_path) == []


def test_autosaves_are_readable_by_their_user_only(tmp_path):
    """Prompts and outputs were 0644 in a 0755 folder: other local users could read them."""
    import stat

    folder = tmp_path / "cache"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    saver = Autosaver(folder)
    session = synthetic_session(2)
    saver.start(session.header)
    for rnd in session.rounds:
        saver.add(rnd)
    assert stat.S_IMODE(saver.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    saver.finish()
