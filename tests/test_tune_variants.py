"""`specviz tune` sweeping drafters and policies as well as K: every (drafter, policy, K)
combination runs, interleaved per prompt, and is reported per run; bad names and a model
drafter without a draft model are usage errors."""

from __future__ import annotations

import json
from itertools import product

from specviz.cli.main import main
from specviz.core.decoding.k_policy import PolicyConfig
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.trace.records import Settings
from specviz.core.tune.promptsets import Prompt
from specviz.core.tune.sweep import SweepConfig, run_sweep
from specviz.core.tune.table import tables_by_category

PROMPTS = [Prompt("bible", "In the beginning God"), Prompt("fortune", "A fool and his money")]


def write_prompts(tmp_path, prompts=PROMPTS[:1]):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"category": p.category, "prompt": p.text}) + "\n"
                            for p in prompts))  # fmt: skip
    return str(path)


def test_tune_sweeps_every_drafter_policy_and_k(pair_dirs, tmp_path, capsys):
    target, draft = pair_dirs
    args = ["tune", "--target", str(target), "--draft", str(draft), "--prompts"]
    args += [write_prompts(tmp_path), "--k", "1-2", "--max-new-tokens", "6"]
    assert (
        main([*args, "--json", "--drafter", "model,lookup", "--policy", "constant,heuristic"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    want = set(product(("model", "lookup"), ("constant", "heuristic"), (1, 2)))
    assert {(r["drafter"], r["policy"], r["k"]) for r in out["runs"]} == want
    assert len(out["runs"]) == 8 and all(r["runs"] == 1 for r in out["runs"])
    assert {(r["drafter"], r["policy"], r["k"]) for r in out["prompt_runs"]} == want
    assert out["completed"] == out["planned"] == 8
    best = out["best"]
    assert (best["drafter"], best["policy"], best["k"]) in want
    assert out["best_k"] == best["k"]
    measured = {
        (r["drafter"], r["policy"], r["k"]): r["speedup_measured_raw"]
        for r in out["runs"]
        if r["speedup_status"] in ("ok", "noisy")
    }
    assert measured[(best["drafter"], best["policy"], best["k"])] == max(measured.values())
    assert main([*args, "--drafter", "lookup,model"]) == 0  # the text table
    text = capsys.readouterr().out
    assert "drafter" in text and "best measured: drafter" in text
    lines = [line.split() for line in text.splitlines()]
    assert {tuple(w[:4]) for w in lines if w[:1] in (["lookup"], ["model"])} == {
        ("lookup", "constant", "token", "1"), ("lookup", "constant", "token", "2"),
        ("model", "constant", "token", "1"), ("model", "constant", "token", "2"),
    }  # fmt: skip


def test_tune_sweeps_verifiers_like_drafters(pair_dirs, tmp_path, capsys):
    """--verifier token,block: each rule at every K, its runs judged by that rule (block
    rounds carry their block numbers), the best named with its verifier and exported with
    it; a lossy rule is refused, since its speed is no speedup of the target."""
    target, draft = pair_dirs
    args = ["tune", "--target", str(target), "--draft", str(draft), "--prompts"]
    args += [write_prompts(tmp_path), "--k", "1,3", "--max-new-tokens", "8", "--json"]
    traces = tmp_path / "traces"
    assert (
        main([*args, "--verifier", "token,block", "--traces", str(traces), "--export", "vllm"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    want = set(product(("token", "block"), (1, 3)))
    assert {(r["verifier"], r["k"]) for r in out["runs"]} == want
    assert {(r["verifier"], r["k"]) for r in out["prompt_runs"]} == want
    assert out["best"]["verifier"] in ("token", "block")
    config = json.loads(out["export"]["command"].split("--speculative-config ", 1)[1].strip("'"))
    assert (config.get("rejection_sample_method") == "block") == (
        out["best"]["verifier"] == "block"
    )
    from specviz.core.trace.files import load

    for run in out["prompt_runs"]:
        session = load(run["trace"])
        assert session.header.settings.verifier == run["verifier"]
        blocks = [r.block is not None for r in session.rounds if r.n_drafted]
        assert blocks and all(b == (run["verifier"] == "block") for b in blocks)
    assert main([*args, "--verifier", "token,typical"]) == 2
    err = capsys.readouterr().err
    assert "typical is lossy" in err and "Traceback" not in err
    assert main([*args, "--verifier", "token,bogus"]) == 2
    assert "--verifier: unknown name 'bogus'" in capsys.readouterr().err


def test_drafters_without_a_draft_model_need_no_draft(pair_dirs, tmp_path, capsys):
    target, _ = pair_dirs
    args = ["tune", "--target", str(target), "--prompts", write_prompts(tmp_path)]
    args += ["--k", "1", "--max-new-tokens", "4", "--json", "--drafter", "lookup,early-exit"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pair"]["draft"] is None
    assert {(r["drafter"], r["policy"], r["k"]) for r in out["runs"]} == {
        ("lookup", "constant", 1), ("early-exit", "constant", 1)
    }  # fmt: skip


def test_bad_names_and_a_missing_draft_model_exit_2(pair_dirs, tmp_path, capsys):
    target, draft = pair_dirs
    base = ["tune", "--target", str(target), "--prompts", write_prompts(tmp_path), "--k", "1"]
    assert main([*base, "--draft", str(draft), "--drafter", "model,bogus"]) == 2
    err = capsys.readouterr().err
    assert "--drafter: unknown name 'bogus'" in err and "Traceback" not in err
    assert main([*base, "--draft", str(draft), "--policy", "constant,,heuristic"]) == 2
    assert "--policy: unknown name ''" in capsys.readouterr().err
    assert main([*base, "--drafter", "lookup,lookup"]) == 2
    assert "names one twice" in capsys.readouterr().err
    assert main([*base, "--drafter", "lookup,model"]) == 2
    assert "--drafter model needs a draft model" in capsys.readouterr().err


def test_run_sweep_interleaves_combinations_per_prompt(pair, tmp_path):
    variants = tuple(
        (DrafterConfig(d), PolicyConfig(p)) for d in ("model", "lookup") for p in ("constant",)
    )
    config = SweepConfig(
        ks=(1, 2), settings=Settings(max_new_tokens=4, seed=3), probe_every=2, variants=variants
    )
    seen = []
    result = run_sweep(pair, PROMPTS, config, on_run=lambda d, t, r: seen.append(r))
    assert result.total == 8 and len(result.runs) == 8
    assert [r.prompt_index for r in seen] == [0] * 4 + [1] * 4  # prompt by prompt
    for i in (0, 1):
        combos = {(r.drafter, r.policy, r.k) for r in seen if r.prompt_index == i}
        assert combos == set(product(("model", "lookup"), ("constant",), (1, 2)))
    tables = tables_by_category(result.runs)
    assert [(r.drafter, r.k) for r in tables["bible"].rows] == [
        ("lookup", 1), ("lookup", 2), ("model", 1), ("model", 2)
    ]  # fmt: skip
    result = run_sweep(pair, PROMPTS[:1], config, trace_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "p001-bible-lookup-constant-k01.jsonl", "p001-bible-lookup-constant-k02.jsonl",
        "p001-bible-model-constant-k01.jsonl", "p001-bible-model-constant-k02.jsonl",
    ]  # fmt: skip


def test_tune_sweeps_tree_shapes_beside_the_chain(pair_dirs, tmp_path, capsys):
    """--tree-width 1,2 --tree-budget 6: the chain and the tree at every K, each run's trace
    a tree session (or a chain's), the shape advice naming both with their pass costs; a
    width without a budget that fits is refused."""
    target, draft = pair_dirs
    args = ["tune", "--target", str(target), "--draft", str(draft), "--prompts"]
    args += [write_prompts(tmp_path), "--k", "2", "--max-new-tokens", "8", "--json"]
    traces = tmp_path / "traces"
    argv = [*args, "--tree-width", "1,2", "--tree-budget", "6", "--traces", str(traces)]
    assert main([*argv, "--export", "vllm"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {(r["verifier"], r["k"]) for r in out["runs"]} == {("token", 2), ("tree2x6", 2)}
    rows = {r["verifier"]: r for r in out["runs"]}
    assert rows["tree2x6"]["pass_tokens"] > rows["token"]["pass_tokens"]
    assert rows["tree2x6"]["speedup_leviathan"] is None  # a chain's formula
    from specviz.core.trace.files import load

    for run in out["prompt_runs"]:
        settings = load(run["trace"]).header.settings
        assert (settings.tree_width, settings.tree_budget) == (
            (2, 6) if run["verifier"] == "tree2x6" else (1, 16)
        )
    if out["best"]["verifier"] == "tree2x6":
        assert any("token tree" in note for note in out["export"]["notes"])
    assert {line.split()[0] for line in out["shape_advice"]} == {"token", "tree2x6"}
    assert all("T_t(" in line for line in out["shape_advice"])
    assert main([*args, "--tree-width", "2", "--tree-budget", "99"]) == 2
    assert "tree budget" in capsys.readouterr().err
