"""The README's headless commands, run as written in a folder holding the files they name
(tests/readme_commands.py lists the ones that cannot run here, and why)."""

from __future__ import annotations

import pytest

from tests.readme_commands import CACHE, commands, make_files, problems, run_specviz

HEADLESS, EXCEPTED = [c for c in commands()[0] if not c.window], commands()[1]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("readme-cli")
    make_files(path)
    return path


def test_only_the_listed_commands_are_left_out():
    assert {line.split()[0] for line, _ in EXCEPTED} <= {"make", "specviz"}
    assert len(EXCEPTED) <= 4 and len(HEADLESS) >= 8


@pytest.mark.parametrize("command", HEADLESS, ids=lambda c: c.id)
def test_headless_command_runs_as_written(command, folder):
    if command.argv[0] == "inspect" and not (folder / command.argv[1]).exists():
        run_specviz(("run", "--trace", command.argv[1]), folder, CACHE, window=False)  # alone
    proc = run_specviz(command.argv, folder, CACHE, window=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert problems(proc) == [], proc.stderr[-3000:]
    assert proc.stdout.strip(), "the command printed nothing"
