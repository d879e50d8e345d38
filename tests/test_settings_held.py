"""A sweep's and a bench's settings are a Settings (core.trace.records), held, not copied field
by field; the lists of settings the sweep request and the window's command line carry derive
from Settings' fields, so a new setting reaches them without an edit there."""

from __future__ import annotations

import dataclasses

import orjson

from specviz.cli import main as cli_main
from specviz.core.bench.results import BenchConfig, BenchSettings
from specviz.core.bench.runs import bench_settings
from specviz.core.resources import DEMO_SEED
from specviz.core.trace.records import Settings
from specviz.core.tune.promptsets import Prompt
from specviz.core.tune.sweep import PER_RUN, SweepConfig, shared_fields
from specviz.remote.sweeps import config_from_json, scalars, sweep_request

# a value away from its default for every field a sweep's runs share
ODD = {
    "temperature": 0.5, "top_k": 7, "top_p": 0.9, "seed": 11, "max_new_tokens": 9,
    "top_n": 5, "ignore_eos": True, "typical_epsilon": 0.2, "typical_delta": 0.05,
    "tree_draw": "topk", "tree_shape": "dynamic",
}  # fmt: skip


def test_sweep_and_bench_hold_a_settings_and_copy_none_of_its_fields():
    names = {f.name for f in dataclasses.fields(Settings)}
    # a sweep's `verifier` is a rule's label, which may name a tree ("tree2x16"): its own
    assert names & {f.name for f in dataclasses.fields(SweepConfig)} == {"verifier"}
    assert not names & {f.name for f in dataclasses.fields(BenchSettings)}
    assert SweepConfig().run_settings(3) == Settings(k=3)  # the runs' settings as before
    assert BenchSettings().settings == Settings(temperature=0)  # greedy, as Spec-Bench
    assert set(ODD) == set(shared_fields())  # every shared field, and no more
    config = SweepConfig(settings=Settings(**ODD, k=9, tree_budget=4), verifier="tree2x6")
    run = config.run_settings(2)
    assert run == Settings(**ODD, k=2, verifier="tree", tree_width=2, tree_budget=6)
    chain = dataclasses.replace(config, verifier="block").run_settings(3)
    assert (chain.k, chain.verifier, chain.tree_width, chain.tree_budget) == (3, "block", 1, 16)
    bench = BenchSettings(Settings(temperature=0, top_n=4, max_new_tokens=6))
    got = bench_settings(BenchConfig("model:3", config.drafter, 3), bench)
    assert got == Settings(k=3, temperature=0, top_n=4, max_new_tokens=6)


def test_the_sweep_request_carries_every_shared_setting():
    shared, own = scalars()
    assert shared == tuple(n for n in (f.name for f in dataclasses.fields(Settings))
                           if n not in PER_RUN)  # fmt: skip
    assert own == ("probe_every", "check_greedy", "verifier")
    prompts = [Prompt("c", "text")]
    config = SweepConfig(ks=(2, 3), settings=Settings(**ODD), probe_every=2, verifier="typical")
    request = orjson.loads(orjson.dumps(sweep_request(prompts, config, False)))
    assert config_from_json(request["config"]) == config
    plain = orjson.loads(orjson.dumps(sweep_request(prompts, SweepConfig(ks=(2,)), False)))
    assert set(plain["config"]) == {*own, "ks", "verifiers", "drafter", "policy", "variants"}


def test_the_window_takes_every_setting_its_setup_shows():
    names = [f.name for f in dataclasses.fields(Settings) if f.name not in cli_main.NOT_IN_SETUP]
    assert list(cli_main.window_settings()) == names
    args = cli_main.build_parser().parse_args(
        ["gui", "--k", "3", "--top-n", "5", "--ignore-eos", "--verifier", "block"]
    )
    settings, _ = cli_main._window_settings(args)
    assert settings == Settings(k=3, top_n=5, ignore_eos=True, verifier="block", seed=DEMO_SEED)
