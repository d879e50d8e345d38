"""`specviz run`: bad input exits 2 with a clear message before any model loads; a real
run prints rounds and writes a trace whose numbers agree with min(1, p/q)."""

from __future__ import annotations

import json
import os

import pytest

from specviz.cli.main import main
from specviz.core.trace.files import load
from tests.fixtures import make_pair_dirs, make_tokenizer


def pair_args(pair_dirs) -> list[str]:
    return ["--target", str(pair_dirs[0]), "--draft", str(pair_dirs[1])]


def run_cli(capsys, *args):
    code = main(["run", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "args,message",
    [
        (["--prompt", "   "], "prompt is empty"),
        (["--k", "0"], "K must be between 1 and 32"),
        (["--k", "33"], "K must be between 1 and 32"),
        (["--temperature", "-0.5"], "temperature must be >= 0"),
        (["--top-p", "0"], "top-p must be in (0, 1]"),
        (["--top-p", "1.2"], "top-p must be in (0, 1]"),
        (["--max-new-tokens", "0"], "max new tokens must be >= 1"),
        (["--target", "/nowhere/t", "--draft", "/nowhere/d"], "does not exist"),
        (["--target", "/nowhere/t"], "give both --target and --draft"),
    ],
)
def test_bad_input_exits_2(capsys, args, message):
    code, _, err = run_cli(capsys, *args)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_trace_path_checked_before_loading(capsys, tmp_path):
    existing = tmp_path / "t.jsonl"
    existing.write_text("keep me")
    # The models do not exist either: the trace path must be reported first.
    code, _, err = run_cli(
        capsys, "--target", "/nowhere/t", "--draft", "/nowhere/d", "--trace", str(existing)
    )
    assert code == 2 and "already exists" in err and "--force" in err
    assert existing.read_text() == "keep me"
    code, _, err = run_cli(
        capsys,
        "--target",
        "/nowhere/t",
        "--draft",
        "/nowhere/d",
        "--trace",
        str(tmp_path / "no" / "such" / "t.jsonl"),
    )
    assert code == 2 and "does not exist" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_trace_folder(capsys, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o500)
    code, _, err = run_cli(capsys, "--trace", str(folder / "t.jsonl"))
    assert code == 2 and "cannot write" in err


def test_mismatched_tokenizers_named(capsys, tmp_path, pair_dirs):
    other = make_tokenizer(vocab_size=300)
    target2, _ = make_pair_dirs(tmp_path, tokenizer=other)
    code, _, err = run_cli(
        capsys, "--target", str(target2), "--draft", str(pair_dirs[1]), "--prompt", "hello"
    )
    assert code == 2 and "different tokenizers" in err
    assert str(target2) in err and str(pair_dirs[1]) in err


def test_not_a_model_folder(capsys, tmp_path):
    code, _, err = run_cli(capsys, "--target", str(tmp_path), "--draft", str(tmp_path))
    assert code == 2 and "not a model folder" in err


def test_unreachable_hub_id_is_reported(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = run_cli(
        capsys,
        "--target",
        "someone/not-cached-model",
        "--draft",
        "someone/not-cached-draft",
        "--prompt",
        "hi",
    )
    assert code == 2
    assert "not in the local Hugging Face cache" in err and "Traceback" not in err


def test_run_prints_rounds_and_writes_a_consistent_trace(capsys, tmp_path, pair_dirs):
    trace = tmp_path / "t.jsonl"
    code, out, err = run_cli(
        capsys,
        *pair_args(pair_dirs),
        "--prompt",
        "In the beginning",
        "--k",
        "3",
        "--max-new-tokens",
        "30",
        "--seed",
        "1",
        "--trace",
        str(trace),
    )
    assert code == 0, err
    assert "round   0" in out and "acceptance rate" in out and "speedup measured" in out
    session = load(trace)
    assert session.rounds and sum(r.n_emitted for r in session.rounds) <= 30
    for rnd in session.rounds:
        for t in rnd.tokens:
            if t.status in ("accepted", "rejected"):
                assert t.accept_prob == pytest.approx(min(1.0, t.p / t.q), rel=1e-9)
                assert (t.u < t.accept_prob) == (t.status == "accepted")
    lines = trace.read_text().splitlines()
    assert json.loads(lines[-1])["type"] == "summary"
    # An existing trace is not clobbered without --force ...
    code, _, err = run_cli(
        capsys,
        *pair_args(pair_dirs),
        "--prompt",
        "x",
        "--trace",
        str(trace),
    )
    assert code == 2 and trace.read_text().splitlines() == lines
    # ... and is with it.
    code, _, _ = run_cli(
        capsys,
        *pair_args(pair_dirs),
        "--prompt",
        "x",
        "--max-new-tokens",
        "3",
        "--trace",
        str(trace),
        "--force",
    )
    assert code == 0 and trace.read_text().splitlines() != lines


def test_run_json_summary(capsys, pair_dirs):
    code, out, _ = run_cli(
        capsys,
        *pair_args(pair_dirs),
        "--prompt",
        "A fool",
        "--temperature",
        "0",
        "--json",
    )
    assert code == 0
    result = json.loads(out)
    assert {
        "rounds",
        "tokens",
        "acceptance_rate",
        "alpha",
        "speedup_measured",
        "speedup_predicted",
        "speedup_refined",
        "speedup_basis",
        "speedup_impossible",
        "window",
        "text",
    } <= set(result)
    assert result["speedup_basis"] == "probes"  # the cost model's, not the header's baseline


def test_an_engine_leaves_a_core_by_default(monkeypatch):
    """One torch thread per core but one (core.engine.threads): measured to keep a session
    and its timings alive beside other work."""
    import torch

    from specviz.core.engine import threads

    before = torch.get_num_threads()
    try:
        monkeypatch.setattr(threads, "cores", lambda: 4)
        assert threads.set_threads(None) == 3 and torch.get_num_threads() == 3
        monkeypatch.setattr(threads, "cores", lambda: 1)
        assert threads.set_threads(None) == 1
        assert threads.set_threads(2) == 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("fault", ["repeat", "gap", "rule"])
def test_run_connect_holds_each_round_to_the_checks(pair, tmp_path, capsys, fault):
    """The rounds of an engine elsewhere are checked as `inspect` checks a trace: a repeated
    or skipped index, or a round whose numbers contradict the rule, stops the run there,
    says why, exits 1 and leaves a valid trace of the rounds before it."""
    import argparse
    import dataclasses

    from specviz.cli.session.session_loop import Formats, drive
    from specviz.core.host.session_host import SessionHost
    from specviz.core.trace.check_session import check_session
    from specviz.core.trace.files import load
    from specviz.core.trace.records import Settings

    class Faulty(SessionHost):
        def run(self, max_rounds=None):
            for rnd in super().run(max_rounds):
                if rnd.index == 2:
                    if fault == "repeat":
                        rnd = dataclasses.replace(rnd, index=1)
                    elif fault == "gap":
                        rnd = dataclasses.replace(rnd, index=3)
                    else:  # accepted drafts it did not keep
                        rnd = dataclasses.replace(rnd, n_accepted=rnd.n_accepted + 1)
                yield rnd

    trace = tmp_path / "t.jsonl"
    args = argparse.Namespace(quiet=True, json=False, trace=str(trace), force=False, chat=False)
    code = drive(
        Faulty(pair), args, "And the earth", Settings(k=3, seed=2, max_new_tokens=60), None,
        Formats(lambda *a: "", lambda d: "summary"), names=lambda h: {}, check=True,
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "the engine sent a round that is not valid" in err, err
    assert "the 2 rounds received are kept" in err and "Traceback" not in err
    session = load(trace)
    assert len(session.rounds) == 2 and check_session(session) == []


def test_run_says_why_it_stopped(capsys, tmp_path, pair_dirs):
    """Issue 37: a draft of 16 positions ends the session early; `run` says why, in its text
    and in --json (finish_reason), as the window's banner does."""
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    tokenizer = AutoTokenizer.from_pretrained(pair_dirs[1])
    eos = tokenizer.eos_token_id
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=16, n_embd=32, n_layer=1, n_head=2,
        bos_token_id=eos, eos_token_id=eos, pad_token_id=eos,
    )  # fmt: skip
    short = tmp_path / "short-draft"
    GPT2LMHeadModel(config).save_pretrained(short)
    tokenizer.save_pretrained(short)
    args = ["--target", str(pair_dirs[0]), "--draft", str(short), "--prompt", "A fool and his",
            "--k", "4", "--max-new-tokens", "40", "--seed", "1"]  # fmt: skip
    code, out, _ = run_cli(capsys, *args, "--json")
    result = json.loads(out)
    assert code == 0 and result["finish_reason"] == "context_length" and result["tokens"] < 40
    code, out, _ = run_cli(capsys, *args, "--quiet")
    assert code == 0
    said = f"finished: the context is full (the shorter model's length); {result['tokens']} of"
    assert said in out
    code, out, _ = run_cli(capsys, *args[:-4], "--max-new-tokens", "3", "--quiet")
    assert "finished: it reached --max-new-tokens; 3 of the 3 new tokens asked" in out
