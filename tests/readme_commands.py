"""The commands of README.md's Quick start and Usage blocks, read from the README itself, and
how the end-to-end tests run each one as a user would (`python -m specviz ARGS`, the window
offscreen with its default child-process engine).

A command that cannot run here is listed in EXCEPTED with the reason; the files a command
names (a trace, a question file, a head) are made in the folder it runs in (FILES)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SECTIONS = ("## Quick start", "## Usage")
SUBCOMMANDS = ("run", "models", "inspect", "lab", "tune", "serve", "bench", "doctor",
               "check-head", "train-head", "cache")  # fmt: skip

# A fragment of the command as written -> why it does not run in the suite.
EXCEPTED = {
    "make test": "the suite itself",
    "gpt2-large": "a hub id: nothing is downloaded here",
    "--device cuda": "CUDA: no GPU here",
    "doctor http": "reads a running vLLM / SGLang / llama.cpp server's /metrics",
    "serve --port": "a server that runs until stopped (tests/test_serve_cli.py starts one)",
}

# Words of the README's commands that name a file -> what the test puts in its place.
PLACEHOLDERS = {
    "HEAD": str(ROOT / "resources" / "models" / "tiny" / "eagle3"),
    "T": "builtin:tiny",
}
QUOTE = (
    "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer "
    "the slings and arrows of outrageous fortune, or to take arms against a sea of troubles."
)


@dataclass(frozen=True)
class Command:
    written: str  # as the README has it, comment removed
    argv: tuple[str, ...]  # the specviz arguments it runs
    window: bool  # opens the window (no subcommand)

    @property
    def id(self) -> str:
        return self.written


def readme_lines() -> list[str]:
    """Every command line of the Quick start and Usage sections' code blocks."""
    text = README.read_text(encoding="utf-8")
    lines: list[str] = []
    for section in SECTIONS:
        body = text.split(section, 1)[1].split("\n## ", 1)[0]
        for block in re.findall(r"```\n(.*?)```", body, flags=re.S):
            for line in block.splitlines():
                command = re.sub(r"\s+#.*$", "", line).strip()
                if command.startswith(("specviz", "make ")):
                    lines.append(command)
    return lines


def excepted(written: str) -> str | None:
    return next((why for frag, why in EXCEPTED.items() if frag in written), None)


def parse(written: str) -> Command:
    """The specviz arguments of one README line ([...] parts, optional, left out)."""
    bare = re.sub(r"\s*\[[^\]]*\]", "", written)
    words = shlex.split(bare)
    if words[0] == "make":  # make run ARGS="..." runs `python -m specviz ARGS`
        args = next((w[5:] for w in words if w.startswith("ARGS=")), "")
        words = ["specviz", *shlex.split(args)]
    argv = tuple(PLACEHOLDERS.get(w, w) for w in words[1:])
    window = not argv or argv[0] not in SUBCOMMANDS
    return Command(written, argv, window)


def commands() -> tuple[list[Command], list[tuple[str, str]]]:
    """(the commands to run, [(command, why not)])."""
    run: dict[tuple[str, ...], Command] = {}
    skipped = []
    for line in readme_lines():
        why = excepted(line)
        if why:
            skipped.append((line, why))
        else:
            command = parse(line)
            run.setdefault(command.argv, command)  # `make run` and `specviz` are one
    return list(run.values()), skipped


def make_files(folder: Path) -> None:
    """The files the README's commands name, in the folder they run in."""
    from specviz.core.trace.files import save
    from specviz.core.trace.session import Session
    from tests.fixtures import sample_header, sample_rounds

    save(Session(sample_header(), sample_rounds()), folder / "trace.jsonl")
    (folder / "quote.txt").write_text(QUOTE + "\n" + QUOTE + "\n", encoding="utf-8")
    docs = sorted((ROOT / "docs").glob("*.md"))  # English text to train a head on
    (folder / "corpus.txt").write_text("\n".join(d.read_text("utf-8") for d in docs), "utf-8")
    questions = (ROOT / "resources" / "prompts" / "chat.jsonl").read_text().splitlines()
    (folder / "question.jsonl").write_text("\n".join(questions[:2]) + "\n", encoding="utf-8")


# One cache folder for every README test (the converted smollm2 target is made once, ~20 s;
# a fresh checkout, as in CI, makes it as a new user's first run does). Ignored by git.
CACHE = ROOT / "work-tmp" / "readme-cache"


def run_specviz(
    argv: tuple[str, ...] | list[str],
    cwd: Path,
    cache: Path,
    window: bool,
    timeout: float = 360,
    python: tuple[str, ...] = (),
) -> subprocess.CompletedProcess:
    """`python -m specviz ARGV` as a user starts it; the window offscreen, driven for a few
    rounds by gui/smoke.py, its errors on stderr instead of dialogs. python: the
    interpreter's own options (`-X importtime`: that process's imports on stderr)."""
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "SPECVIZ_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(ROOT),
    }
    if window:
        env.update(SPECVIZ_SMOKE_ROUNDS="3", SPECVIZ_NO_DIALOGS="1",
                   SPECVIZ_QUIT_AFTER_MS=str(int(timeout * 600)))  # fmt: skip
    return subprocess.run(
        [sys.executable, *python, "-m", "specviz", *argv],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


BAD_LINES = ("Traceback", "Fatal Python error", "QThread: Destroyed", "specviz: error",
             "Could not", "Segmentation fault")  # fmt: skip


def imported(stderr: str) -> set[str]:
    """The modules a `python -X importtime` process imported (its stderr's table)."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines()
            if line.startswith("import time:") and line.count("|") == 2}  # fmt: skip


def problems(proc: subprocess.CompletedProcess) -> list[str]:
    """Lines of stderr a clean run does not print."""
    return [line for line in proc.stderr.splitlines() if any(b in line for b in BAD_LINES)]


def make_dry_run(args: str) -> str:
    """What `make -n run ARGS=...` would run (the recipe, not run)."""
    if shutil.which("make") is None:
        return ""
    return subprocess.run(
        ["make", "-n", "run", f"ARGS={args}"], cwd=ROOT, capture_output=True, text=True
    ).stdout
