"""Half precision explained (issue 36 item 4): a greedy bf16 session names the first token
where its text leaves the target alone's greedy decoding (position, both tokens, the logit
margin, the pass width), and only there; float32 sessions are not watched."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from specviz.core.decoding import greedy_check
from specviz.core.decoding.forward import decode
from specviz.core.decoding.greedy_check import GreedyWatch, _Reference
from specviz.core.decoding.warp import SamplingConfig
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.models.pair import load_pair
from specviz.core.trace.extras.greedy_diff import GreedyDiff
from specviz.core.trace.files import load, save
from specviz.core.trace.parse import parse_round
from specviz.core.trace.records import Settings, TraceError
from specviz.core.trace.rounds import with_extras
from specviz.core.trace.serialize import round_to_json
from specviz.core.trace.session import Session

GREEDY = Settings(k=4, temperature=0, max_new_tokens=40)


@pytest.fixture(scope="module")
def half_pair(pair_dirs):
    return load_pair(str(pair_dirs[0]), str(pair_dirs[1]), dtype="bfloat16")


def run(pair, prompt="In the beginning", settings=GREEDY):
    engine = SpeculativeEngine(pair, settings)
    engine.prefill(prompt, calibrate=False)
    return engine, list(engine.run())


@pytest.mark.parametrize("prompt", ["In the beginning", "A fool and his money", "The quick"])
def test_a_difference_is_named_exactly_where_the_texts_part(half_pair, prompt):
    engine, rounds = run(half_pair, prompt)
    emitted = [t.id for r in rounds for t in r.emitted]
    alone = decode(half_pair.target, list(engine.header.prompt_ids), len(emitted),
                   half_pair.vocab_size, SamplingConfig(temperature=0),
                   eos_token_id=half_pair.eos_token_id)  # fmt: skip
    diffs = [(r, r.greedy_diff) for r in rounds if r.greedy_diff is not None]
    parted = next((i for i, (a, b) in enumerate(zip(emitted, alone, strict=False)) if a != b), None)
    if parted is None:
        assert diffs == []  # none where the texts agree
        return
    assert len(diffs) == 1  # the first difference, once
    rnd, diff = diffs[0]
    assert diff.position == parted and diff.ours == emitted[parted]
    assert diff.theirs == alone[parted] and diff.pass_tokens == rnd.n_drafted + 1
    assert diff.logit_theirs >= diff.logit_ours  # the target alone's argmax there


def test_the_watch_names_the_first_difference_with_its_margin(half_pair):
    watch = GreedyWatch(half_pair, [1, 2, 3], eos=None)
    watch.ref = _Reference(tokens=[5, 6, 7], top=[([5, 8], [3.0, 1.0]), ([6, 9], [2.5, 2.47]),
                                                   ([7, 5], [4.0, 0.0])], cache=None)  # fmt: skip
    watch.ref.ended = True  # nothing more to decode
    assert watch.check([5], 0, 5) is None
    diff = watch.check([9, 7], 1, 5)
    assert (diff["position"], diff["ours"], diff["theirs"], diff["pass_tokens"]) == (1, 9, 6, 5)
    assert diff["logit_theirs"] - diff["logit_ours"] == pytest.approx(0.03)
    assert watch.check([7], 2, 3) is None  # named once
    text = GreedyDiff.from_value({**diff, "text_ours": " a", "text_theirs": " the"}).text(
        "bfloat16"
    )
    assert "a near-tie: 0.03 between ' the' (the target alone) and ' a'" in text
    assert "a pass of 5 tokens rounds differently from a pass of 1" in text
    assert "generated token 2" in text


def test_float32_is_not_watched_and_stays_the_target_alones(pair):
    engine, rounds = run(pair)
    assert engine.greedy_watch is None and all(r.greedy_diff is None for r in rounds)
    emitted = [t.id for r in rounds for t in r.emitted]
    alone = decode(pair.target, list(engine.header.prompt_ids), len(emitted), pair.vocab_size,
                   SamplingConfig(temperature=0), eos_token_id=pair.eos_token_id)  # fmt: skip
    assert emitted == alone


def test_the_reference_is_computed_once_per_prompt(half_pair, monkeypatch):
    greedy_check._REFERENCES.clear()
    run(half_pair)
    passes = []
    real = greedy_check.forward
    monkeypatch.setattr(
        greedy_check, "forward", lambda *a, **kw: passes.append(1) or real(*a, **kw)
    )
    run(half_pair)  # the same prompt again (another session): the cached reference
    assert passes == []


def test_bench_does_not_decode_the_target_alone_beside_its_sessions(half_pair, monkeypatch):
    """bench times a session whole and compares its text with its own target-alone run: the
    watch's one more target pass a token would be counted in its wall time."""
    from specviz.core.bench.questions import Question
    from specviz.core.bench.results import BenchSettings
    from specviz.core.bench.runs import parse_configs, run_bench

    greedy_check._REFERENCES.clear()
    passes = []
    real = greedy_check.forward
    monkeypatch.setattr(
        greedy_check, "forward", lambda *a, **kw: passes.append(1) or real(*a, **kw)
    )
    settings = BenchSettings(Settings(temperature=0, max_new_tokens=12), warmup=False)
    result = run_bench(half_pair, [Question("1", "w", ("In the beginning",))],
                       parse_configs("model:4"), settings)  # fmt: skip
    assert len(result.runs) == 2 and passes == []
    run(half_pair, settings=dataclasses.replace(GREEDY, max_new_tokens=12))  # the window's
    assert passes  # a session of the window, `run` or tune is watched


def test_sampled_sessions_are_not_watched(half_pair):
    engine, rounds = run(half_pair, settings=dataclasses.replace(GREEDY, temperature=1.0))
    assert engine.greedy_watch is None and all(r.greedy_diff is None for r in rounds)


def test_a_greedy_diff_survives_the_trace_and_bad_ones_are_refused(half_pair, tmp_path, capsys):
    from specviz.cli.main import main

    engine, rounds = run(half_pair, settings=dataclasses.replace(GREEDY, max_new_tokens=6))
    choice = {"dtype": "bfloat16", "why": "faster here for K 4: x", "k": 4}
    engine.header = dataclasses.replace(engine.header, dtype_choice=choice)
    diff = {"position": 2, "ours": 9, "theirs": 6, "text_ours": " a", "text_theirs": " the",
            "logit_ours": 2.47, "logit_theirs": 2.5, "pass_tokens": 5}  # fmt: skip
    rounds[0] = with_extras(rounds[0], greedy_diff=diff)
    session = Session(engine.header)
    for r in rounds:
        session.append(r)
    save(session, tmp_path / "t.jsonl")
    assert load(tmp_path / "t.jsonl").details(0).greedy_diff.to_json() == diff
    capsys.readouterr()
    assert main(["inspect", str(tmp_path / "t.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "dtype       bfloat16: --dtype auto, faster here for K 4" in out
    assert "greedy      round 0 (from 0): the text leaves the target alone's greedy decoding" in out
    assert "a near-tie: 0.03 between ' the' (the target alone) and ' a'" in out
    assert main(["inspect", "--json", str(tmp_path / "t.jsonl")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["greedy_diff"] == {**diff, "round": 0} and report["dtype_choice"] == choice
    line = round_to_json(rounds[0])
    line["greedy_diff"] = {**diff, "logit_ours": "2.47"}
    with pytest.raises(TraceError, match="greedy_diff.logit_ours"):
        parse_round(json.loads(json.dumps(line)), engine.header.session_id, 2)


def test_half_dtype_names():
    assert greedy_check.HALF == ("bfloat16", "float16")
    assert torch.bfloat16 != torch.float32


def test_the_window_shows_where_the_text_parts(qtbot, half_pair):
    from specviz.gui.status_bar import StatusBar
    from specviz.gui.stream.panel import StreamPanel

    engine, rounds = run(half_pair, settings=dataclasses.replace(GREEDY, max_new_tokens=6))
    diff = {"position": 1, "ours": 9, "theirs": 6, "text_ours": " a", "text_theirs": " the",
            "logit_ours": 2.47, "logit_theirs": 2.5, "pass_tokens": 5}  # fmt: skip
    last = len(rounds) - 1
    assert last >= 1
    rounds[last] = with_extras(rounds[last], greedy_diff=diff)
    panel = StreamPanel()
    qtbot.addWidget(panel)
    panel.clear(engine.header)
    panel.append_rounds(rounds[:last])
    assert panel.greedy.isHidden()  # none where the texts agree
    panel.append_rounds(rounds[last:])
    assert not panel.greedy.isHidden()
    assert f"Round {last + 1}: the text leaves the target alone's greedy text at token 2" in (
        panel.greedy.text()
    )
    assert "in bfloat16" in panel.greedy.toolTip() and "a near-tie: 0.03" in panel.greedy.toolTip()
    panel.show_round(last)
    assert "leaves the target alone's text at token 2" in panel.round_label.text()
    panel.clear(engine.header)
    assert panel.greedy.isHidden()
    status = StatusBar()
    qtbot.addWidget(status)
    status.set_pair("t", "cpu")
    choice = {"dtype": "bfloat16", "why": "faster here for K 4: ...", "k": 4}
    status.set_dtype(dataclasses.replace(engine.header, dtype_choice=choice))
    assert status.device.text() == "device: cpu, bfloat16 (auto)"
    assert "faster here for K 4" in status.device.toolTip()
