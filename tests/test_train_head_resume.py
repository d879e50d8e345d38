"""A train-head run killed with SIGKILL and started again with --resume loses only the steps
since its last checkpoint and then takes the very steps an unbroken run takes; SIGTERM
writes a checkpoint before the process exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import torch

from specviz.cli.main import main
from tests.train_head_data import FAST, write_text

ROOT = Path(__file__).resolve().parents[1]
ARGS = [*FAST, "--epochs", "1", "--tokens", "2500", "--save-every", "3", "--eval-every", "100",
        "--log-every", "1", "--no-check"]  # fmt: skip


def _start(text: Path, out: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "specviz", "train-head", "--target", "builtin:tiny",
            "--data", str(text), "--out", str(out), *ARGS]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def _run_until(proc: subprocess.Popen, step: int) -> list[str]:
    """stderr lines until the progress line of `step` (the process is left running)."""
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith(f"step {step}/"):
            return lines
    raise AssertionError("".join(lines))


def _losses(out: Path) -> dict[int, float]:
    return {e["step"]: e["loss"] for e in json.loads((out / "training.json").read_text())["losses"]}


def test_a_killed_run_resumes_from_its_last_checkpoint_and_takes_the_same_steps(tmp_path):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "killed"
    proc = _start(text, out)
    said = _run_until(proc, 5)  # checkpoints at 3; step 5 taken
    first_step = next(i for i, line in enumerate(said) if line.startswith("step "))
    estimate = next(i for i, line in enumerate(said) if line.startswith("estimate: "))
    assert estimate < first_step and " min; disk: checkpoint " in said[estimate]
    assert "tokens/s" in said[first_step] and "left" in said[first_step]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    saved = torch.load(out / "checkpoint.pt", weights_only=True)
    assert saved["state"]["step"] == 3  # 5 reached: only the 2 steps since the save are lost
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary left over
    code = main(["train-head", "--target", "builtin:tiny", "--data", str(text), "--out",
                 str(out), "--resume", *ARGS])  # fmt: skip
    assert code == 0
    whole = tmp_path / "whole"
    assert main(["train-head", "--target", "builtin:tiny", "--data", str(text), "--out",
                 str(whole), *ARGS]) == 0  # fmt: skip
    resumed, unbroken = _losses(out), _losses(whole)
    assert min(resumed) == 1 and max(resumed) == max(unbroken) > 6
    for step in range(4, max(unbroken) + 1):  # the steps after the checkpoint, taken again
        assert abs(resumed[step] - unbroken[step]) <= 1e-3 * abs(unbroken[step]), step


def test_sigterm_writes_a_checkpoint_before_exiting(tmp_path):
    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "stopped"
    proc = _start(text, out)
    _run_until(proc, 4)  # past the checkpoint at 3, before the one at 6
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait() == 130, rest
    assert "interrupted at step" in rest and "Traceback" not in rest
    step = torch.load(out / "checkpoint.pt", weights_only=True)["state"]["step"]
    assert step >= 4  # written at the step it stopped on, not the last periodic one
    assert not (out / "config.json").exists()  # no head from an interrupted run
