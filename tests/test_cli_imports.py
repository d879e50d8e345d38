"""Issue 48: `specviz --help` and `specviz inspect TRACE` start without torch and
transformers (the drafter registry's specs load without them; a drafter's module is
imported when one is built). Each check runs in a fresh interpreter: this one has torch."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

from specviz.core.drafters.registry import SPECS
from tests.fixtures import synthetic_lines

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers")


def _imported_after(code: str) -> list[str]:
    """The heavy packages imported by a fresh interpreter that ran `code`."""
    probe = (
        f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_building_the_whole_parser_imports_no_torch():
    code = "from specviz.cli.main import build_parser\nbuild_parser().format_help()"
    assert _imported_after(code) == []


def test_inspect_imports_no_torch(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(synthetic_lines(12)) + "\n", encoding="utf-8")
    for extra in ([], ["--json"]):
        argv = ["inspect", str(trace), *extra]
        code = (
            "import contextlib, io\nfrom specviz.cli.main import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main({argv!r}) == 0"
        )
        assert _imported_after(code) == [], extra


def test_the_specs_load_without_torch_and_name_their_builders():
    """Every spec is readable without torch, and its build imports a module that has one."""
    code = "from specviz.core.drafters.registry import SPECS, all_params\nall_params()"
    assert _imported_after(code) == []
    for spec in SPECS.values():
        assert spec.build.__qualname__.startswith("built_by('specviz.core.drafters.")
        module = spec.build.__qualname__.split("'")[1]
        assert callable(importlib.import_module(module).build), spec.kind
