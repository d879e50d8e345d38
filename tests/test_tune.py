"""`specviz tune`, the sweep behind it and prompt sets: keys of --json, the table, cancelling
(an event and Ctrl-C), bad prompt files, the greedy check, --from-trace on 1.0 and 1.1
traces."""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from specviz.cli.main import main
from specviz.cli.tune import tune as tune_command
from specviz.core.trace.records import Settings
from specviz.core.tune.promptsets import Prompt, PromptSetError, load_prompt_set, shipped_set
from specviz.core.tune.sweep import SweepConfig, run_sweep, sweep_plan
from specviz.core.tune.table import tables_by_category

PROMPTS = [Prompt("bible", "In the beginning God"), Prompt("fortune", "A fool and his money")]


def test_shipped_set_has_categories():
    prompts = load_prompt_set()
    cats = {p.category for p in prompts}
    assert len(cats) >= 4
    assert all(sum(p.category == c for p in prompts) >= 5 for c in cats)
    assert load_prompt_set(shipped_set()) == prompts


def test_plain_text_and_jsonl_sets(tmp_path):
    text = tmp_path / "p.txt"
    text.write_text("# a comment\nfirst prompt\n\nsecond\\nline\n", encoding="utf-8")
    assert load_prompt_set(text) == [
        Prompt("default", "first prompt"),
        Prompt("default", "second\nline"),
    ]
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"category": "a", "prompt": "x"}\n{"prompt": "y"}\n', encoding="utf-8")
    assert load_prompt_set(jsonl) == [Prompt("a", "x"), Prompt("default", "y")]


@pytest.mark.parametrize(
    "content, message",
    [
        (b'{"prompt": "x"}\n{"prompt": \n', "line 2: not JSON"),
        (b'{"category": "a"}\n', "line 1: 'prompt' must be a non-empty string"),
        (b'["x"]\n', "line 1: expected an object"),
        (b'{"prompt": "x", "category": 3}\n', "'category' must be"),
        (b"# only a comment\n", "holds no prompts"),
        (b"\xff\xfe bad", "not UTF-8"),
    ],
)
def test_bad_prompt_files_say_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(PromptSetError, match=message):
        load_prompt_set(path)
    with pytest.raises(PromptSetError, match="no such file"):
        load_prompt_set(tmp_path / "missing.jsonl")


def test_plan_interleaves_and_shuffles_per_prompt():
    plan = sweep_plan(3, [1, 2, 3, 4], seed=1)
    assert sorted(plan) == [(i, k) for i in range(3) for k in (1, 2, 3, 4)]
    assert [i for i, _ in plan] == [0] * 4 + [1] * 4 + [2] * 4
    orders = {tuple(k for i, k in plan if i == p) for p in range(3)}
    assert len(orders) > 1  # not one fixed order


def test_parse_ks():
    assert tune_command.parse_ks("1-4") == (1, 2, 3, 4)
    assert tune_command.parse_ks("4,1,2") == (1, 2, 4)
    for bad in ("0-3", "x", "5-2", "40"):
        with pytest.raises(tune_command.UsageError):
            tune_command.parse_ks(bad)


def test_sweep_table_per_k_and_category(pair):
    config = SweepConfig(ks=(1, 3), settings=Settings(max_new_tokens=12, seed=2), probe_every=2)
    result = run_sweep(pair, PROMPTS, config)
    assert not result.cancelled and len(result.runs) == result.total == 4
    tables = tables_by_category(result.runs)
    assert list(tables) == ["overall", "bible", "fortune"]
    rows = tables["overall"].rows
    assert [r.k for r in rows] == [1, 3]
    for r in rows:
        assert r.runs == 2 and r.tokens_per_pass <= r.k + 1
        # a 12-token run is often too noisy to tell: the figure is there, and says so
        assert r.speedup.value is not None and r.speedup_refined is not None
        assert r.speedup.status in ("ok", "noisy") and r.speedup.interval is not None
    assert [k for k, _ in tables["overall"].curve] == list(range(1, 17))


def test_sweep_cancels_between_rounds(pair):
    cancel = threading.Event()
    seen = []

    def on_run(done, total, run):
        seen.append(run)
        cancel.set()

    config = SweepConfig(ks=(1, 2, 3), settings=Settings(max_new_tokens=12))
    result = run_sweep(pair, PROMPTS, config, cancel, on_run)
    assert result.cancelled and result.runs == seen and len(result.runs) == 1
    assert result.total == 6


def test_ctrl_c_stops_the_sweep_and_reports_what_finished(pair):
    messages = []

    def progress(message):
        messages.append(message)
        if message.startswith("run 1/"):
            os.kill(os.getpid(), signal.SIGINT)

    config = SweepConfig(ks=(1, 2), settings=Settings(max_new_tokens=12))
    before = signal.getsignal(signal.SIGINT)
    result = tune_command.sweep(pair, PROMPTS, config, progress)
    assert result.cancelled and len(result.runs) == 1
    assert any("stopping after this round" in m for m in messages)
    assert signal.getsignal(signal.SIGINT) is before  # the handler is put back


def write_prompts(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(vars(p)) + "\n" for p in PROMPTS).replace("text", "prompt"))
    return str(path)


def test_tune_json_keys(pair_dirs, tmp_path, capsys):
    target, draft = pair_dirs
    args = ["tune", "--target", str(target), "--draft", str(draft), "--prompts"]
    args += [write_prompts(tmp_path), "--k", "1-2", "--max-new-tokens", "8", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"runs", "best_k", "advisor", "costs", "categories", "cancelled"} <= set(out)
    assert [r["k"] for r in out["runs"]] == [1, 2]
    for r in out["runs"]:
        keys = ("k", "alpha", "tokens_per_pass", "speedup_measured", "speedup_refined")
        assert set(keys) | {"speedup_leviathan"} <= set(r)
    assert out["best_k"] in (1, 2) and out["advisor"]["best_k"] in range(1, 17)
    assert set(out["categories"]) == {"bible", "fortune"}


def test_tune_table_and_greedy_check(pair_dirs, tmp_path, capsys):
    target, draft = pair_dirs
    args = ["tune", "--target", str(target), "--draft", str(draft), "--prompts"]
    args += [write_prompts(tmp_path), "--k", "2", "--max-new-tokens", "8"]
    assert main([*args, "--temperature", "0", "--check-greedy"]) == 0
    out = capsys.readouterr().out
    assert "== overall" in out and "== bible" in out and "advisor's best K" in out
    assert "Leviathan" in out and "every run equals the target's own greedy decoding" in out
    assert main([*args, "--check-greedy"]) == 2  # needs --temperature 0
    assert "--check-greedy needs --temperature 0" in capsys.readouterr().err


def test_tune_bad_prompt_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": 1}\n')
    assert main(["tune", "--prompts", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specviz: error:") and "line 1" in err and "Traceback" not in err


def test_check_greedy_finds_a_difference(pair):
    from specviz.core.decoding.greedy_check import check_greedy

    ids = pair.tokenizer("In the beginning")["input_ids"]
    from specviz.core.decoding.forward import decode
    from specviz.core.decoding.warp import SamplingConfig

    ref = decode(pair.target, ids, 6, pair.vocab_size, SamplingConfig(temperature=0))
    assert check_greedy(pair, ids, ref) is None
    wrong = [*ref[:3], (ref[3] + 1) % pair.vocab_size, *ref[4:]]
    diff = check_greedy(pair, ids, wrong)
    assert diff.position == 3 and diff.theirs == ref[3] and diff.ours == wrong[3]
    assert diff.logit_theirs > diff.logit_ours


def test_from_trace_with_and_without_probes(pair, tmp_path, capsys):
    from specviz.core.engine.cost_probes import ProbePlan, Prober
    from specviz.core.engine.speculative import SpeculativeEngine
    from specviz.core.trace.files import save
    from specviz.core.trace.session import Session

    engine = SpeculativeEngine(
        pair,
        Settings(k=3, seed=4, max_new_tokens=20),
        prober=Prober(ProbePlan(every=2, budget=None)),
    )
    engine.calibration_tokens = 1
    session = Session(engine.prefill("And the earth was"))
    for rnd in engine.run():
        session.append(rnd)
    path = tmp_path / "t.jsonl"
    save(session, path)
    assert main(["tune", "--from-trace", str(path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["probes"] >= 2 and d["speedup_measured_raw"] and d["advisor"]["best_k"]
    assert d["speedup_status"] in ("ok", "noisy") and d["speedup_ci"]
    assert [w["k"] for w in d["whatif"]] == [1, 2] and all(w["estimate"] for w in d["whatif"])
    # A 1.0 trace (no probes): what it can say, and no speedup.
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["schema"] = "specviz.trace/1"
    rounds = [json.loads(line) for line in lines[1:] if '"type":"round"' in line]
    for r in rounds:
        r.pop("probes", None)
        r.pop("events_ms", None)
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join(json.dumps(o) for o in [header, *rounds]) + "\n")
    assert main(["tune", "--from-trace", str(old)]) == 0
    out = capsys.readouterr().out
    assert "no cost-model probes" in out and "what-if K'=2 (estimate" in out


def test_tune_with_the_lookup_drafter(pair_dirs, tmp_path, capsys):
    target, _ = pair_dirs
    args = ["tune", "--target", str(target), "--drafter", "lookup", "--prompts"]
    args += [write_prompts(tmp_path), "--k", "2", "--max-new-tokens", "8", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["drafter"] == "lookup" and out["pair"]["draft"] is None
    assert [r["k"] for r in out["runs"]] == [2]


def test_sweep_writes_each_runs_trace(pair, tmp_path):
    from specviz.core.trace import files as tracefile
    from specviz.core.tune.sweep import trace_name
    from specviz.core.tune.table import prompt_rows

    config = SweepConfig(ks=(1, 2), settings=Settings(max_new_tokens=6, seed=1), probe_every=2)
    result = run_sweep(pair, PROMPTS[:1], config, trace_dir=tmp_path)
    assert len(result.runs) == 2
    for run in result.runs:
        assert run.trace_path == str(tmp_path / trace_name(0, "bible", run.k))
        session = tracefile.load(run.trace_path)
        assert session.header.settings.k == run.k and session.header.prompt == PROMPTS[0].text
        assert [(r.n_drafted, r.n_accepted) for r in session.rounds] == [
            (r.n_drafted, r.n_accepted) for r in run.rounds
        ]
        loaded_ids = [[t.id for t in r.tokens] for r in session.rounds]
        assert loaded_ids == [[t.id for t in r.tokens] for r in run.rounds]
        whole = [session.lines.details(r) for r in session.rounds]  # the lists, parsed
        assert any(t.top for r in whole for t in r.tokens)  # the trace has the top-N lists
        assert not any(t.top for r in run.rounds for t in r.tokens)  # memory does not
    rows = prompt_rows(result.runs, tables_by_category(result.runs)["overall"].costs)
    assert [(r.prompt_index, r.category, r.k) for r in rows] == [(0, "bible", 1), (0, "bible", 2)]
    run = next(r for r in result.runs if r.k == 2)
    judged = [
        t.status for r in run.rounds for t in r.tokens if t.status in ("accepted", "rejected")
    ]
    assert rows[1].alpha == judged.count("accepted") / len(judged)
    emitted = sum(r.n_emitted for r in run.rounds)
    assert rows[1].tokens_per_pass == emitted / len(run.rounds)
    assert rows[1].speedup.value is not None and rows[1].trace_path == run.trace_path
    assert trace_name(4, "a/b c", 3) == "p005-a_b_c-k03.jsonl"


def test_tune_traces_writes_readable_traces(pair_dirs, tmp_path, capsys):
    from specviz.core.trace import files as tracefile

    target, draft = pair_dirs
    folder = tmp_path / "traces"
    args = ["tune", "--target", str(target), "--draft", str(draft), "--prompts"]
    args += [write_prompts(tmp_path), "--k", "1-2", "--max-new-tokens", "6"]
    assert main([*args, "--traces", str(folder), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    runs = out["prompt_runs"]
    assert [(r["prompt"], r["category"], r["k"]) for r in runs] == [
        (0, "bible", 1), (0, "bible", 2), (1, "fortune", 1), (1, "fortune", 2)
    ]  # fmt: skip
    assert sorted(p.name for p in folder.iterdir()) == [
        "p001-bible-k01.jsonl", "p001-bible-k02.jsonl",
        "p002-fortune-k01.jsonl", "p002-fortune-k02.jsonl",
    ]  # fmt: skip
    for r in runs:
        session = tracefile.load(r["trace"])
        assert session.header.settings.k == r["k"] and len(session.rounds) == r["rounds"]
    assert main([*args, "--traces", str(folder / "p001-bible-k01.jsonl")]) == 2
    assert "--traces: cannot write to" in capsys.readouterr().err


def test_tune_traces_on_a_full_disk_keeps_the_tables_and_exits_2(pair_dirs, tmp_path, capsys,
                                                                monkeypatch):  # fmt: skip
    """A trace that cannot be written (ENOSPC here: the suite runs as root, so a read-only
    folder would not refuse it) costs that trace only: every run is in the tables, the
    runs without a trace are named, and the exit status is 2. A folder that cannot be
    written at all is refused before the models load."""
    import errno

    from specviz.core.tune import sweep as sweep_module

    real = sweep_module.save
    written = []

    def full_after_one(session, path, summary=None):
        if written:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(path)
        return real(session, path, summary)

    monkeypatch.setattr(sweep_module, "save", full_after_one)
    target, draft = pair_dirs
    folder = tmp_path / "traces"
    args = ["tune", "--target", str(target), "--draft", str(draft), "--prompts"]
    args += [write_prompts(tmp_path), "--k", "1-2", "--max-new-tokens", "6", "--json"]
    assert main([*args, "--traces", str(folder)]) == 2
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["completed"] == 4 and len(out["prompt_runs"]) == 4
    assert sum(r["trace"] is not None for r in out["prompt_runs"]) == 1
    assert captured.err.count("was not written: No space left on device") == 3
    assert "3 run traces not written" in captured.err and "Traceback" not in captured.err

    import tempfile

    def refuse(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    assert main([*args, "--traces", str(tmp_path / "ro")]) == 2
    err = capsys.readouterr().err
    assert (
        "--traces: cannot write to" in err and "Permission denied" in err and "loading" not in err
    )
