"""Two gloo ranks under `torchrun --standalone --nproc-per-node 2` take the steps one process
takes on the same global batch: their losses agree within 1% step by step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from specviz.cli.main import main
from tests.train_head_data import FAST, write_text

ROOT = Path(__file__).resolve().parents[1]
ARGS = [*FAST, "--epochs", "1", "--tokens", "2500", "--eval-every", "100", "--log-every", "1",
        "--no-check"]  # fmt: skip


def _losses(out: Path) -> list[float]:
    return [e["loss"] for e in json.loads((out / "training.json").read_text())["losses"]]


def test_two_gloo_ranks_match_one_process(tmp_path):
    text = write_text(tmp_path / "text.txt")
    common = ["train-head", "--target", "builtin:tiny", "--data", str(text), *ARGS]
    assert main([*common, "--out", str(tmp_path / "one")]) == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
            "2", "-m", "specviz", *common, "--out", str(tmp_path / "two")]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "two" / "training.json").read_text())
    assert report["world_size"] == 2
    one, two = _losses(tmp_path / "one"), _losses(tmp_path / "two")
    assert len(one) == len(two) >= 8
    for step, (a, b) in enumerate(zip(one, two, strict=True), 1):
        assert abs(a - b) <= 0.01 * abs(a), (step, a, b)
    assert "Traceback" not in done.stderr
