"""scripts/head_blocks.py: a long head training in blocks that a later call continues: which
step each block takes next (chats, a warm start from the block before, a resume), the
deadline's SIGTERM, and the curve's offsets."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures import script


@pytest.fixture(scope="module")
def blocks():
    with script("head_blocks") as module:
        module.POLL_S = 0.05
        yield module


def write_report(head: Path, stopped: str, points: list[tuple[int, float]]) -> None:
    head.mkdir(parents=True, exist_ok=True)
    curve = [{"trained": t, "mat_k4": m} for t, m in points]
    trained = points[-1][0] if points else 0
    report = {"stopped": stopped, "trained_tokens": trained, "curve": curve}
    (head / "training.json").write_text(json.dumps(report))


def test_each_block_warm_starts_from_the_one_before_and_resumes_its_checkpoint(blocks, tmp_path):
    ns = type("A", (), {})()
    ns.root, ns.start, ns.pair, ns.eval_data = tmp_path, Path("START"), "smollm2", ["EVAL"]
    ns.lr, ns.epochs, ns.eval_every, ns.threads, ns.device = 3e-4, 1.0, 100, 2, "cpu"
    first = blocks.train_command(ns, 0)
    assert first[first.index("--from-head") + 1] == "START"
    second = blocks.train_command(ns, 1)
    assert second[second.index("--from-head") + 1] == str(tmp_path / "b000" / "head")
    assert second[second.index("--data") + 1] == str(tmp_path / "b001" / "chats")
    (tmp_path / "b001" / "head").mkdir(parents=True)
    (tmp_path / "b001" / "head" / "checkpoint.pt").write_bytes(b"x")
    resumed = blocks.train_command(ns, 1)
    assert "--resume" in resumed and "--from-head" not in resumed
    assert resumed[resumed.index("--dtype") + 1] == "float32"
    ns.device = "cuda"  # where a GPU is lent: the target in bf16 there
    assert blocks.train_command(ns, 1)[resumed.index("--dtype") + 1] == "bfloat16"


def test_a_call_skips_finished_blocks_and_writes_what_is_missing(blocks, tmp_path, monkeypatch):
    write_report(tmp_path / "b000" / "head", "finished", [(0, 1.6), (1000, 1.7)])
    calls = []

    def fake(command, deadline, log):
        calls.append(command)
        if "head_data.py" in command[1]:
            chats = Path(command[command.index("--out") + 1])
            chats.mkdir(parents=True, exist_ok=True)
            for i in range(2):
                (chats / f"shard-{i:04d}.safetensors").write_bytes(b"")
        else:
            write_report(Path(command[command.index("--out") + 1]), "finished", [(0, 1.7)])
        return True

    monkeypatch.setattr(blocks, "run_until", fake)
    argv = ["--root", str(tmp_path), "--start", "S", "--eval-data", "E", "--shards", "2"]
    assert blocks.main([*argv, "--blocks", "2"]) == 0
    assert [c[1].endswith("head_data.py") or c[2] for c in calls] == [True, "specviz"]
    assert calls[0][calls[0].index("--seed") + 1] == "102"  # block 1: seed + 1
    assert calls[0][calls[0].index("--out") + 1] == str(tmp_path / "b001" / "chats")


def test_the_deadline_stops_the_running_step(blocks, tmp_path):
    log, done = tmp_path / "log", tmp_path / "done"
    command = [sys.executable, "-c", f"import time; time.sleep(60); open({str(done)!r}, 'w')"]
    deadline = time.time() + 1
    assert blocks.run_until(command, deadline, log) is False  # waited for, it would be True
    assert not done.exists()
    assert "time.sleep(60)" in log.read_text()


def test_a_failed_step_stops_the_call_with_its_log(blocks, tmp_path):
    with pytest.raises(SystemExit, match="failed"):
        failing = [sys.executable, "-c", "raise SystemExit(3)"]
        blocks.run_until(failing, float("inf"), tmp_path / "l")


def test_status_counts_each_block_from_the_tokens_before_it(blocks, tmp_path, capsys):
    write_report(tmp_path / "b000" / "head", "finished", [(0, 1.65), (400_000, 1.70)])
    write_report(tmp_path / "b001" / "head", "", [(0, 1.70), (100_000, 1.72)])
    blocks.main(["--root", str(tmp_path), "--start-tokens", "2000000", "--status"])
    out = capsys.readouterr().out
    assert "2,400,000  #MAT K4 1.7000" in out
    assert "2,500,000  #MAT K4 1.7200" in out
    assert f"b001={tmp_path / 'b001' / 'head' / 'training.json'}+2400000" in out


def test_a_signal_to_the_script_stops_its_running_step(blocks, tmp_path):
    blocks.STOPPED.append(1)  # as the SIGTERM handler main() installs does
    try:
        command = [sys.executable, "-c", "import time; time.sleep(60)"]
        assert blocks.run_until(command, float("inf"), tmp_path / "log") is False
    finally:
        blocks.STOPPED.clear()
