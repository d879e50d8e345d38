"""The real app in a subprocess (`python -m specviz`), quit by its own timer: it must exit 0
with no traceback or fatal error on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from specviz.core.trace.files import save
from specviz.core.trace.session import Session
from tests.fixtures import sample_header, sample_rounds

ROOT = Path(__file__).resolve().parents[1]


def run_app(args: list[str], tmp_path: Path, quit_after_ms: int) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "SPECVIZ_QUIT_AFTER_MS": str(quit_after_ms),
        "SPECVIZ_NO_DIALOGS": "1",  # messages go to stderr; questions are answered "no"
        "SPECVIZ_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "specviz", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def test_app_loads_a_pair_opens_a_trace_and_quits(tmp_path, pair_dirs):
    trace = tmp_path / "toy.jsonl"
    save(Session(sample_header(), sample_rounds()), trace)
    target, draft = (str(d) for d in pair_dirs)
    proc = run_app([str(trace), "--target", target, "--draft", draft], tmp_path, 5000)
    assert proc.returncode == 0, proc.stderr
    for bad in (
        "Traceback",
        "Fatal Python error",
        "QThread: Destroyed",
        "specviz: error",
        "Could not open",
    ):
        assert bad not in proc.stderr, proc.stderr
