"""The built-in `tiny` pair: registry, committed folders, and the script that makes them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from specviz.core.models.builtin import (
    BUILTIN_PAIRS,
    DEFAULT_PAIR,
    BuiltinError,
    get_pair,
    resources_dir,
)

REPO = Path(__file__).resolve().parents[1]


def test_get_pair_accepts_both_spellings():
    assert get_pair("tiny") is get_pair("builtin:tiny") is BUILTIN_PAIRS[DEFAULT_PAIR]


def test_unknown_pair_lists_known_names():
    with pytest.raises(BuiltinError) as err:
        get_pair("builtin:nope")
    assert "'builtin:nope'" in str(err.value)
    for name in BUILTIN_PAIRS:
        assert f"builtin:{name}" in str(err.value)


def test_resources_dir_is_the_repo_folder():
    assert resources_dir() == REPO / "resources"


def test_every_resource_follows_specviz_resources(monkeypatch, tmp_path):
    from specviz.core import resources
    from specviz.core.models import smollm2

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SPECVIZ_RESOURCES", "~/res")  # ~ expanded, as everywhere
    assert resources_dir() == tmp_path / "res"
    assert smollm2.draft_dir() == tmp_path / "res" / "models" / "smollm2" / "draft"
    assert resources.prompts_file() == tmp_path / "res" / "prompts.txt"
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / "prompts.txt").write_text("# a comment\nmy own prompt\n")
    assert resources.example_prompts() == ["my own prompt"]


def test_one_cache_folder_for_autosave_and_smollm2(monkeypatch, tmp_path):
    from specviz.core.models import smollm2
    from specviz.core.trace import autosave

    monkeypatch.setenv("HOME", str(tmp_path))
    for value in ("~/cache", str(tmp_path / "cache")):
        monkeypatch.setenv("SPECVIZ_CACHE", value)
        assert autosave.cache_folder() == tmp_path / "cache"
        assert smollm2.cache_dir() == tmp_path / "cache" / smollm2.CACHE_NAME


def test_smollm2_does_not_import_builtin_back():
    """builtin lists the pairs and imports smollm2 for one of them; never the reverse."""
    import ast

    tree = ast.parse((REPO / "specviz" / "core" / "models" / "smollm2.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "specviz.core.models.weights" in imported  # the walk saw its imports
    assert not any(name.endswith("builtin") for name in imported)


def test_resolve_loads_offline_with_one_tokenizer():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    messages = []
    target_dir, draft_dir = get_pair("builtin:tiny").resolve(progress=messages.append)
    assert messages and "builtin:tiny" in messages[0]
    # Offline means no connection at all is tried while the pair loads.
    with mock.patch("socket.socket.connect", side_effect=AssertionError("network used")):
        target = AutoModelForCausalLM.from_pretrained(target_dir, local_files_only=True)
        draft = AutoModelForCausalLM.from_pretrained(draft_dir, local_files_only=True)
        tok_t = AutoTokenizer.from_pretrained(target_dir, local_files_only=True)
        tok_d = AutoTokenizer.from_pretrained(draft_dir, local_files_only=True)
    assert tok_t.get_vocab() == tok_d.get_vocab()
    assert (target_dir / "tokenizer.json").read_bytes() == (
        draft_dir / "tokenizer.json"
    ).read_bytes()
    assert target.config.vocab_size == draft.config.vocab_size == len(tok_t)
    assert target.config.n_positions >= 512 and draft.config.n_positions >= 512
    assert draft.num_parameters() < target.num_parameters()
    for folder in (target_dir, draft_dir):  # loadable by transformers 4.x too
        config = json.loads((folder / "tokenizer_config.json").read_text())
        assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    ids = tok_t("In the beginning God created")["input_ids"]
    assert tok_t.decode(ids) == "In the beginning God created"
    assert tok_t.eos_token == tok_t.bos_token == tok_t.pad_token == "<|endoftext|>"


def test_info_reports_measured_figures():
    info = get_pair("tiny").info()
    assert info["present"] is True
    assert 1_000_000 < info["size_bytes"] < 50_000_000
    training = info["measured"]["training"]
    assert training["smoke"] is False
    assert info["params"] == {
        "target": training["target"]["params"],
        "draft": training["draft"]["params"],
    }
    assert 0.0 < training["alpha"]["windows_256"] <= 1.0


def test_core_builtin_imports_no_qt():
    code = (
        "import sys, specviz.core.models.builtin\n"
        "print(any(m.startswith('PySide6') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """(folder, process) of one `scripts/train_tiny.py --smoke` run, shared by the tests below."""
    out = tmp_path_factory.mktemp("smoke") / "tiny"
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "train_tiny.py"), "--smoke", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    return out, proc


def test_train_script_smoke(smoke_run):
    """`scripts/train_tiny.py --smoke` runs end to end in seconds into a given folder."""
    out, proc = smoke_run
    if proc.returncode == 2 and "apt-get install" in proc.stdout:
        pytest.skip("corpus packages missing: " + proc.stdout.strip().splitlines()[-1].strip())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "alpha" in proc.stdout
    report = json.loads((out / "training.json").read_text())
    assert report["smoke"] is True
    assert 0.0 < report["alpha"]["windows_32"] <= 1.0
    for role in ("target", "draft"):
        names = {p.name for p in (out / role).iterdir()}
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= names
    from transformers import AutoModelForCausalLM, AutoTokenizer

    AutoModelForCausalLM.from_pretrained(out / "draft", local_files_only=True)
    AutoTokenizer.from_pretrained(out / "target", local_files_only=True)


def test_train_script_goes_on_from_an_earlier_run(smoke_run, tmp_path):
    """--target-from/--draft-from reuse an earlier run's weights (the target's copied as they
    are) and --draft-objective tvd trains on 1 - sum min(p, q); --align-steps trains the
    target further against the frozen --draft-from draft (and needs one); training.json says
    so."""
    script = [sys.executable, str(REPO / "scripts" / "train_tiny.py"), "--smoke"]
    (first, proc), second = smoke_run, tmp_path / "second"
    if proc.returncode == 2 and "apt-get install" in proc.stdout:
        pytest.skip("corpus packages missing")
    assert proc.returncode == 0, proc.stderr[-2000:]
    args = ["--target-from", str(first), "--draft-from", str(first), "--draft-objective", "tvd"]
    proc = subprocess.run([*script, *args, "--out", str(second)], capture_output=True,
                          text=True, cwd=REPO, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "tvd" in proc.stdout and "held-out alpha" in proc.stdout
    weights = "target/model.safetensors"
    assert (second / weights).read_bytes() == (first / weights).read_bytes()
    draft = json.loads((second / "training.json").read_text())["draft"]["training"]
    assert draft["objective"].startswith("1 - sum_x min(p(x), q(x))")
    assert draft["started_from"]["objective"].startswith("KL")
    assert [step for step, _ in draft["heldout_alpha_curve"]] == [2, 4]
    aligned = tmp_path / "aligned"
    args = ["--target-from", str(first), "--draft-from", str(first), "--align-steps", "4"]
    proc = subprocess.run([*script, *args, "--out", str(aligned)], capture_output=True,
                          text=True, cwd=REPO, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (aligned / weights).read_bytes() != (first / weights).read_bytes()
    target = json.loads((aligned / "training.json").read_text())["target"]["training"]
    align = target["then_aligned"]
    assert align["objective"].startswith("next-token cross-entropy + 5.0 x (1 - sum_x min")
    assert [row[0] for row in align["heldout_loss_alpha_curve"]] == [2, 4]
    assert all(0 < alpha <= 1 for _, _, alpha in align["heldout_loss_alpha_curve"])
    args = ["--target-from", str(first), "--align-steps", "4", "--out", str(tmp_path / "x")]
    proc = subprocess.run([*script, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)  # fmt: skip
    assert proc.returncode != 0 and "--align-steps needs --draft-from" in proc.stderr
