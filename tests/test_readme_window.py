"""The README's window commands, run as written (`python -m specviz ARGS`, offscreen, the
default child-process engine), each driven for a few rounds by gui/smoke.py; and every
drafter that needs no draft model started from the command line the same way."""

from __future__ import annotations

import re

import pytest

from tests.readme_commands import (
    CACHE,
    commands,
    imported,
    make_dry_run,
    make_files,
    problems,
    run_specviz,
)

WINDOW = [c for c in commands()[0] if c.window]
SMOKE = re.compile(
    r"specviz smoke: (stopped|finished) after (\d+) rounds, (\d+) tokens, drafter ([^,\s]+)"
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("readme-window")
    make_files(path)
    return path


def smoke_line(proc) -> re.Match:
    found = SMOKE.search(proc.stderr)
    assert found, f"the window did not run (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    return found


def test_the_readme_has_window_commands():
    assert any(c.argv == () for c in WINDOW)  # `make run` / `specviz`
    assert any(c.argv[-2:] == ("--drafter", "eagle3") for c in WINDOW)  # a head, no draft model


@pytest.mark.parametrize("command", WINDOW, ids=lambda c: c.id)
def test_window_command_runs_as_written(command, folder):
    proc = run_specviz(command.argv, folder, CACHE, window=True)
    assert problems(proc) == [], proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stderr[-3000:]
    how, rounds, tokens, drafter = smoke_line(proc).groups()
    assert int(rounds) >= 2 and int(tokens) >= int(rounds)
    if "--drafter" in command.argv:
        assert drafter == command.argv[command.argv.index("--drafter") + 1]


@pytest.mark.parametrize("drafter", ["lookup", "early-exit"])
def test_a_drafter_without_a_draft_model_starts_in_the_child_engine(drafter, folder):
    """The window's child `specviz serve` is started for the drafter: it used to get
    `--draft ""` and no drafter, and refused to start ("give both --target and --draft").
    eagle3 is the README's own `make run ARGS="--pair smollm2 --drafter eagle3"` above; suffix
    takes lookup's path (no model, no layers of the target's), early-exit the target's layers.
    The window's own process imports neither torch nor transformers (the child does): it
    starts a second or two sooner and holds no model."""
    proc = run_specviz(["--drafter", drafter], folder, CACHE, window=True,
                       python=("-X", "importtime"))  # fmt: skip
    assert problems(proc) == [], proc.stderr[-3000:]
    assert smoke_line(proc).group(4) == drafter
    modules = imported(proc.stderr)
    assert "PySide6" in modules and not modules & {"torch", "transformers"}


def test_make_run_runs_the_app_with_its_args():
    recipe = make_dry_run("--pair smollm2 --drafter eagle3")
    if not recipe:
        pytest.skip("make is not installed")
    assert "-m specviz --pair smollm2 --drafter eagle3" in recipe
