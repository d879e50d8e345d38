"""Hostile and broken command lines (issue 14): one clear line and exit code 2, no
traceback, nothing loaded or executed that should not be."""

from __future__ import annotations

import json
import pickle
import shutil

import pytest

from specviz.cli.main import main
from specviz.core.models.pair import ModelLoadError, load_pair, resolve_device

NOWHERE = ["--target", "/nowhere/t", "--draft", "/nowhere/d"]


def run_cli(capsys, *args):
    try:
        code = main(list(args))
    except SystemExit as e:  # argparse's own errors
        code = e.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "", "cuda:-1"])
def test_bad_device_is_refused_at_parse_time(capsys, device):
    code, _, err = run_cli(capsys, "run", "--device", device, *NOWHERE)
    assert code == 2 and "unknown device" in err and "cuda:N" in err


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "", "cuda:7"])
def test_bad_device_from_the_window_is_a_load_error(device):
    with pytest.raises(ModelLoadError):
        resolve_device(device)


@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
@pytest.mark.parametrize("option", ["--temperature", "--top-p"])
def test_non_finite_numbers_refused(capsys, option, value):
    code, _, err = run_cli(capsys, "run", f"{option}={value}", *NOWHERE)
    assert code == 2 and "not a finite number" in err


@pytest.mark.parametrize("seed", [str(2**64), "-1", "1e3"])
def test_seed_out_of_range_refused_with_the_range(capsys, seed):
    code, _, err = run_cli(capsys, "run", f"--seed={seed}", *NOWHERE)
    assert code == 2 and "--seed" in err
    if seed != "1e3":
        assert "0 to 2**64 - 1" in err


def test_largest_seed_is_accepted_by_the_parser(capsys):
    code, _, err = run_cli(capsys, "run", "--seed", str(2**64 - 1), *NOWHERE)
    assert code == 2 and "does not exist" in err  # got as far as the models


def test_non_utf8_prompt_refused_before_loading(capsys, tmp_path):
    prompt = b"caf\xe9 \xff".decode("utf-8", "surrogateescape")  # as argv carries such bytes
    code, _, err = run_cli(capsys, "run", "--prompt", prompt, *NOWHERE)
    assert code == 2 and "not UTF-8" in err and "does not exist" not in err
    path = tmp_path / "prompt.txt"
    path.write_bytes(b"caf\xe9 au lait")
    code, _, err = run_cli(capsys, "run", "--prompt-file", str(path), *NOWHERE)
    assert code == 2 and "not UTF-8" in err and "0xe9" in err


def test_opening_a_file_that_is_not_a_trace(capsys, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# hello\n")
    code, _, err = run_cli(capsys, str(readme))
    assert code == 2 and "is not a trace" in err and "invalid choice" not in err
    code, _, err = run_cli(capsys, str(tmp_path / "bad" / "README.md"))
    assert code == 2 and "no such file" in err
    code, _, err = run_cli(capsys, str(tmp_path))
    assert code == 2 and "is a folder" in err


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_trace_path_that_is_a_folder(capsys, tmp_path, force):
    code, _, err = run_cli(capsys, "run", "--trace", str(tmp_path), *force, *NOWHERE)
    assert code == 2 and "is a folder" in err and "already exists" not in err


@pytest.fixture
def broken_target(tmp_path, pair_dirs):
    folder = tmp_path / "broken"
    shutil.copytree(pair_dirs[0], folder)
    return folder


def test_corrupt_safetensors_refused_clearly(capsys, broken_target, pair_dirs):
    (broken_target / "model.safetensors").write_bytes(b"\x00garbage" * 100)
    code, _, err = run_cli(
        capsys, "run", "--target", str(broken_target), "--draft", str(pair_dirs[1]), "--prompt", "x"
    )
    assert code == 2 and "safetensors" in err and "damaged" in err


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))  # would create the marker file when unpickled


def test_pickle_payload_refused_and_never_run(capsys, broken_target, pair_dirs, tmp_path):
    marker = tmp_path / "ran"
    (broken_target / "model.safetensors").unlink()
    with open(broken_target / "pytorch_model.bin", "wb") as f:
        pickle.dump({"transformer.wte.weight": _Payload(str(marker))}, f, protocol=2)
    code, _, err = run_cli(
        capsys, "run", "--target", str(broken_target), "--draft", str(pair_dirs[1]), "--prompt", "x"
    )
    assert code == 2 and "pytorch_model.bin" in err and "safetensors" in err
    assert not marker.exists()


def test_remote_code_refused_unless_trusted(capsys, broken_target, pair_dirs):
    config = json.loads((broken_target / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilModel"}
    (broken_target / "config.json").write_text(json.dumps(config))
    code, _, err = run_cli(
        capsys, "run", "--target", str(broken_target), "--draft", str(pair_dirs[1]), "--prompt", "x"
    )
    assert code == 2 and "--trust-remote-code" in err and "modeling_evil" in err


def test_revision_of_a_local_folder_refused(pair_dirs):
    with pytest.raises(ModelLoadError, match="hub id"):
        load_pair(str(pair_dirs[0]), str(pair_dirs[1]), revision="main")


def test_device_map_needs_accelerate(monkeypatch, pair_dirs):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "accelerate" else real(n, *a)
    )
    with pytest.raises(ModelLoadError, match="pip install accelerate"):
        load_pair(str(pair_dirs[0]), str(pair_dirs[1]), device_map="auto")


def test_prompt_and_text_escaped_on_the_terminal(capsys, pair_dirs):
    code, out, _ = run_cli(
        capsys,
        "run",
        "--target",
        str(pair_dirs[0]),
        "--draft",
        str(pair_dirs[1]),
        "--prompt",
        "title\x1b]0;pwned\x07 clear\x1b[2J csi\x9b2J",
        "--max-new-tokens",
        "4",
    )
    assert code == 0
    assert "\x1b" not in out and "\x9b" not in out and "\x07" not in out
    assert "\\x1b]0;pwned\\x07" in out


def test_window_takes_the_drafter_policy_and_loading_options(capsys, monkeypatch):
    from specviz.gui import app

    calls = []
    monkeypatch.setattr(app, "main", lambda *a, **kw: calls.append((a, kw)) or 0)
    code, _, err = run_cli(
        capsys, "--target", "builtin:tiny", "--drafter", "lookup", "--ngram-max", "3",
        "--policy", "heuristic", "--device-map", "auto", "--revision", "v1",
    )  # fmt: skip
    assert code == 0, err
    (specs, _device, _dtype, _trace, (drafter, policy), options), _ = calls[0]
    assert specs == ("builtin:tiny", "")  # lookup: no draft model to load
    assert (drafter.kind, drafter.param("ngram_max"), policy.kind) == ("lookup", 3, "heuristic")
    assert options.device_map == "auto" and options.revision == "v1"
    code, _, err = run_cli(capsys, "--drafter", "lookup", "--draft", "x", "--target", "y")
    assert code == 2 and "--draft" in err


def test_ctrl_c_while_loading_is_no_traceback(capsys, monkeypatch):
    from specviz.core.models import spec

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(spec, "load_pair", interrupted)  # what PairSpec.load calls
    code, _, err = run_cli(capsys, "run", "--prompt", "x")
    assert code == 130 and "interrupted" in err


def test_a_prompt_file_that_never_ends_or_never_opens_is_refused(capsys, tmp_path):
    """/dev/zero read until memory ran out and a FIFO with no writer blocked forever: only a
    regular file of at most 16 MiB is read, for run, tune and inspect."""
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for args in (
        ["run", "--prompt-file", "/dev/zero"],
        ["run", "--prompt-file", str(fifo)],
        ["tune", "--prompts", "/dev/zero"],
        ["inspect", str(fifo)],
    ):
        code, _, err = run_cli(capsys, *args)
        assert code == 2 and "not a regular file" in err and "Traceback" not in err, args
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        f.truncate((16 << 20) + 1)
    code, _, err = run_cli(capsys, "run", "--prompt-file", str(big))
    assert code == 2 and "too large" in err


def test_a_temperature_that_would_overflow_is_refused(capsys):
    """1e-38 passed validation, then logits / T overflowed to inf and the run crashed."""
    code, _, err = run_cli(capsys, "run", "--temperature", "1e-38")
    assert code == 2 and "0 (greedy) or at least" in err
