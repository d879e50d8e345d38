"""`specviz run --drafter ... --policy ...`: options checked before loading, a lookup or
early-exit run loads no draft model and writes a trace with drafter, policy, K and stop."""

from __future__ import annotations

import pytest

from specviz.cli.main import main
from specviz.core.trace.files import load


def run_cli(capsys, *args):
    code = main(["run", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "args,message",
    [
        (["--policy", "threshold", "--threshold", "1.5"], "threshold must be between 0 and 1"),
        (["--drafter", "lookup", "--ngram-max", "0"], "n-gram max must be an integer between 1"),
        (["--drafter", "early-exit", "--exit-layer", "0"], "exit layer must be an integer between"),
        (["--drafter", "lookup", "--target", "/t", "--draft", "/d"], "--draft is used only"),
    ],
)
def test_bad_drafter_options_exit_2_before_loading(capsys, args, message):
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and message in err and "Traceback" not in err
    assert "loading" not in err


def test_unknown_drafter_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_cli(capsys, "--drafter", "medusa")
    assert exit_info.value.code == 2
    assert "invalid choice: 'medusa'" in capsys.readouterr().err


def test_help_names_transformers_options(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for name in (
        "prompt_lookup_num_tokens",
        "assistant_early_exit",
        "num_assistant_tokens_schedule",
        "assistant_confidence_threshold",
    ):
        assert name in out


def test_lookup_run_needs_no_draft_model(capsys, pair_dirs, tmp_path):
    trace = tmp_path / "lookup.jsonl"
    code, out, err = run_cli(
        capsys, "--target", str(pair_dirs[0]), "--drafter", "lookup", "--ngram-max", "3",
        "--policy", "heuristic", "--prompt", "the cat and the dog and the cat and the",
        "--max-new-tokens", "12", "--trace", str(trace), "--quiet",
    )  # fmt: skip
    assert code == 0, err
    assert "loading draft" not in err
    session = load(trace)
    assert session.header.drafter == {"kind": "lookup", "ngram_max": 3}
    assert session.header.policy == {"kind": "heuristic"}
    assert session.header.draft.params == 0
    assert all(r.k is not None and r.stop is not None for r in session.rounds)
    assert any(r.copied_from is not None for r in session.rounds)


def test_early_exit_too_deep_is_refused_after_loading(capsys, pair_dirs):
    code, _, err = run_cli(
        capsys, "--target", str(pair_dirs[0]), "--drafter", "early-exit", "--exit-layer", "2",
        "--prompt", "Hello",
    )  # fmt: skip
    assert code == 2 and "exit layer must be between 1 and 1" in err and "Traceback" not in err


def test_early_exit_threshold_run(capsys, pair_dirs, tmp_path):
    trace = tmp_path / "ee.jsonl"
    code, _, err = run_cli(
        capsys, "--target", str(pair_dirs[0]), "--drafter", "early-exit", "--exit-layer", "1",
        "--policy", "threshold", "--threshold", "0.6", "--k", "5", "--prompt", "A fool and",
        "--max-new-tokens", "16", "--trace", str(trace), "--quiet",
    )  # fmt: skip
    assert code == 0, err
    header = load(trace).header
    assert header.drafter["kind"] == "early-exit" and header.drafter["exit_layer"] == 1
    assert header.policy == {"kind": "threshold", "threshold": 0.6}
