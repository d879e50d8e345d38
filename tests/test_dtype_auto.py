"""--dtype auto (issue 36 item 3): the decision from the probe's timings (injected: no clock
is read here), the per-machine cache's round trip, and a pair loaded in the dtype chosen."""

from __future__ import annotations

import json

import pytest
import torch

from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.models import dtype_probe
from specviz.core.models.dtype_probe import choose_dtype, decide
from specviz.core.models.pair import load_pair
from specviz.core.trace.records import Settings

# ms of the target's pass of n tokens: fp32 grows with n, bf16 stays flat (a CPU with AMX).
FLAT_BF16 = {"float32": {1: 54.0, 2: 60.0, 5: 118.0}, "bfloat16": {1: 56.0, 2: 58.0, 5: 62.0}}


def test_the_faster_dtype_for_the_sessions_k_is_kept():
    dtype, why = decide(FLAT_BF16, k=4)
    assert dtype == "bfloat16" and "62.0 ms in bfloat16 against 118.0 ms" in why
    dtype, why = decide(FLAT_BF16, k=1)  # 58 against 60: not clearly faster
    assert dtype == "float32" and "float32 kept" in why and "3% faster" in why
    slow_bf16 = {"float32": {1: 40.0, 5: 60.0}, "bfloat16": {1: 140.0, 5: 210.0}}  # no bf16 units
    assert decide(slow_bf16, k=4)[0] == "float32"


def test_the_teaching_pair_stays_exact_for_a_small_gain():
    """builtin:tiny on a 2-core EPYC with avx512_bf16 and no AMX (issue 48): bf16 gains 12% at
    K+1 and nothing at one token; the 0.95 rule took bf16 (and left exactness for it)."""
    tiny = {"float32": {1: 3.79, 5: 4.96}, "bfloat16": {1: 3.81, 5: 4.35}}
    dtype, why = decide(tiny, k=4)
    assert dtype == "float32" and "12% faster" in why and "1% slower" in why
    # smollm2 on the same machine: 29% at 5 tokens, 17% at one: worth half precision
    smollm2 = {"float32": {1: 55.0, 5: 77.0}, "bfloat16": {1: 45.6, 5: 54.4}}
    assert decide(smollm2, k=4)[0] == "bfloat16"
    flat_but_slower_alone = {"float32": {1: 40.0, 5: 80.0}, "bfloat16": {1: 44.0, 5: 50.0}}
    assert decide(flat_but_slower_alone, k=4)[0] == "float32"


def timer_from(table, calls):
    def timer(model, n):
        calls.append(n)
        dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        return table[dtype][n]

    return timer


def test_the_probe_runs_once_per_machine_and_is_cached(pair, tmp_path):
    cache, calls = tmp_path / "dtype-probe.json", []
    model_id = {"name": "t", "path": "/m/t", "params": 1}
    first = choose_dtype(pair.target, model_id, 4, cache, timer_from(FLAT_BF16, calls))
    assert first["dtype"] == "bfloat16" and not first["cached"]
    assert first["probe_ms"]["bfloat16"] == {"1": 56.0, "5": 62.0} and calls
    assert next(pair.target.parameters()).dtype == torch.float32  # probed on a copy
    entry = next(iter(json.loads(cache.read_text())["entries"].values()))
    assert entry["probe_ms"]["float32"] == {"1": 54.0, "5": 118.0} and entry["torch"]

    def refuse(model, n):
        raise AssertionError("probed again")

    again = choose_dtype(pair.target, model_id, 4, cache, refuse)
    assert (
        again["cached"] and again["dtype"] == "bfloat16" and again["probe_ms"] == first["probe_ms"]
    )
    other = choose_dtype(
        pair.target, {**model_id, "path": "/m/other"}, 4, cache, timer_from(FLAT_BF16, [])
    )
    assert not other["cached"]  # another model: its own entry
    calls.clear()
    k1 = choose_dtype(pair.target, model_id, 1, cache, timer_from(FLAT_BF16, calls))
    assert not k1["cached"] and set(calls) == {1, 2} and k1["dtype"] == "float32"
    entry = json.loads(cache.read_text())["entries"]
    widths = {tuple(sorted(e["probe_ms"]["float32"])) for e in entry.values()}
    assert ("1", "2", "5") in widths  # the new width is added to what was measured


def test_a_probe_on_a_busy_machine_keeps_float32_and_is_not_kept(pair, tmp_path):
    """A busy machine's timings decide nothing (a smollm2 bench beside other work timed 540
    against 785 ms, 10x the quiet figures, and took bfloat16 on a CPU where it is 1.8x
    slower): float32, exact, until a quiet probe says otherwise."""
    cache, calls = tmp_path / "dtype-probe.json", []
    steady = timer_from(FLAT_BF16, calls)

    def busy(model, n):  # every other round of passes 10x slower: another job on the cores
        return steady(model, n) * (10 if len(calls) // 4 % 2 else 1)

    choice = choose_dtype(pair.target, {"name": "t"}, 4, cache, busy)
    assert choice["dtype"] == "float32" and not choice["steady"]
    assert choice["probe_ms"]["bfloat16"]["5"] == 62.0 and "machine was busy" in choice["why"]
    assert not cache.exists()  # not kept: timed again next time


def test_a_damaged_cache_is_probed_again(pair, tmp_path):
    cache = tmp_path / "dtype-probe.json"
    cache.write_text("{not json")
    calls = []
    choice = choose_dtype(pair.target, {"name": "t"}, 4, cache, timer_from(FLAT_BF16, calls))
    assert (
        calls
        and not choice["cached"]
        and json.loads(cache.read_text())["version"] == dtype_probe.CACHE_VERSION
    )


def test_auto_loads_the_pair_in_the_dtype_chosen(pair_dirs, tmp_path, monkeypatch):
    monkeypatch.delenv(dtype_probe.PIN_VARIABLE)
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    monkeypatch.setattr(dtype_probe, "time_pass", timer_from(FLAT_BF16, []))
    from specviz.core.models import pair as pair_module

    monkeypatch.setattr(pair_module, "LARGE_HEAD", 0)  # the loader's head product, on the test head
    pair = load_pair(str(pair_dirs[0]), str(pair_dirs[1]), dtype="auto", dtype_k=4)
    assert pair.target.dtype == pair.draft.dtype == torch.bfloat16
    for model in (pair.target, pair.draft):  # float32 was packed; bf16 gets the head's product
        head = model.get_output_embeddings()
        assert type(head) is torch.nn.Linear and "forward" in vars(head)
    assert pair.target_info.dtype == pair.draft_info.dtype == "bfloat16"
    engine = SpeculativeEngine(pair, Settings(k=4, temperature=0, max_new_tokens=6))
    header = engine.prefill("In the beginning", calibrate=False)
    assert header.dtype_choice["dtype"] == "bfloat16" and "K 4" in header.dtype_choice["why"]
    assert sum(len(r.emitted) for r in engine.run()) == 6
    assert (tmp_path / dtype_probe.CACHE_FILE).is_file()


def test_the_pin_variable_chooses_without_probing(pair_dirs, monkeypatch):
    monkeypatch.setenv(dtype_probe.PIN_VARIABLE, "float32")
    monkeypatch.setattr(dtype_probe, "time_pass", None)  # a probe would fail
    pair = load_pair(str(pair_dirs[0]), str(pair_dirs[1]), dtype="auto")
    assert pair.target.dtype == torch.float32 and "SPECVIZ_DTYPE_AUTO" in pair.dtype_choice["why"]


@pytest.mark.parametrize("given, expected", [(None, "auto"), ("float32", "float32")])
def test_auto_is_the_default_for_a_builtin_pair(given, expected):
    from specviz.cli.main import build_parser
    from specviz.cli.options import load_options

    argv = ["run", "--pair", "tiny", *(["--dtype", given] if given else [])]
    assert load_options(build_parser().parse_args(argv)).dtype == expected
    folder = build_parser().parse_args(["run", "--target", "/m/t", "--draft", "/m/d"])
    assert load_options(folder).dtype == "float32"


def test_tune_sweeps_each_dtype(pair_dirs, tmp_path, capsys):
    from specviz.cli.main import main

    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"category": "bible", "prompt": "In the beginning"}) + "\n")
    args = ["tune", "--target", str(pair_dirs[0]), "--draft", str(pair_dirs[1]), "--prompts",
            str(prompts), "--k", "2", "--max-new-tokens", "8",
            "--dtype", "float32,bfloat16"]  # fmt: skip
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["dtypes"]) == {"float32", "bfloat16"}
    assert out["fastest_dtype"] in (None, "float32", "bfloat16")
    for dtype, row in out["dtypes"].items():
        assert [r["k"] for r in row["sweep"]["runs"]] == [2], dtype
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "== dtype float32 ==" in text and "== dtype bfloat16 ==" in text
    assert "fastest dtype here:" in text
    with pytest.raises(SystemExit):
        main([*args[:-1], "float32,int8"])


def test_the_bf16_copy_of_a_sped_up_head_computes_in_bf16(pair, monkeypatch):
    import copy

    from specviz.core.models import pair as pair_module

    monkeypatch.setattr(pair_module, "LARGE_HEAD", 0)  # the loader's head product, on the test head
    target = copy.deepcopy(pair.target)
    assert pair_module.speed_up_head(target)
    times, _ = dtype_probe.probe(target, (1, 2), dtype_probe.time_pass, pair_module.speed_up_head)
    assert all(ms > 0 for row in times.values() for ms in row.values())
    half = dtype_probe._half_copy(target, pair_module.speed_up_head)
    assert "forward" in vars(half.get_output_embeddings())  # the product, on the copy's weight
    logits = half(input_ids=torch.tensor([[1, 2, 3]])).logits
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits.float()).all()
