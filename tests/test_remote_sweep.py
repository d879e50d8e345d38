"""A K sweep through the Engine seam (issue 32, item 5): the served engine's `sweep` op gives
the in-process sweep's runs, token for token, each as it finishes; its traces are written on
the client's side; a pause stops it between two rounds and keeps the runs that finished;
a bad request is refused, the server lives. The server on a thread, 127.0.0.1 only."""

from __future__ import annotations

import threading

import orjson
import pytest

from specviz.core.host.session_host import SessionHost
from specviz.core.trace import files as tracefile
from specviz.core.trace.records import Settings
from specviz.core.tune.promptsets import Prompt
from specviz.core.tune.sweep import SweepConfig, run_sweep, trace_name
from specviz.remote import protocol as P
from specviz.remote.client import RemoteEngine
from specviz.remote.sweeps import config_from_json, sweep_request
from tests.test_remote import TOKEN, raw_requests, server  # noqa: F401

PROMPTS = [Prompt("bible", "In the beginning God"), Prompt("fortune", "A fool and his money")]


def fates(run) -> list:
    return [[(t.id, t.status, t.p, t.q) for t in r.tokens] for r in run.rounds]


def test_a_served_sweep_gives_the_in_process_sweeps_runs(server, pair, tmp_path):  # noqa: F811
    config = SweepConfig(ks=(1, 3), settings=Settings(max_new_tokens=6, seed=2), probe_every=2)
    seen = []
    with RemoteEngine(server.address, TOKEN) as remote:
        got = remote.sweep(PROMPTS, config, on_run=lambda *a: seen.append(a), trace_dir=tmp_path)
    expected = SessionHost(pair).sweep(PROMPTS, config)
    assert not got.cancelled and got.total == expected.total == len(got.runs) == 4
    assert [(d, t) for d, t, _ in seen] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert [run for *_, run in seen] == got.runs
    key = [(r.prompt_index, r.category, r.k, r.drafter, r.policy) for r in expected.runs]
    assert [(r.prompt_index, r.category, r.k, r.drafter, r.policy) for r in got.runs] == key
    assert [fates(r) for r in got.runs] == [fates(r) for r in expected.runs]
    assert any(r.probes for run in got.runs for r in run.rounds)  # the probes crossed too
    for run in got.runs:  # written here, from the lines the server sent
        assert run.trace_path == str(tmp_path / trace_name(run.prompt_index, run.category, run.k))
        session = tracefile.load(run.trace_path)
        assert session.header.settings.k == run.k
        assert [[t.id for t in r.tokens] for r in session.rounds] == [
            [t.id for t in r.tokens] for r in run.rounds
        ]
        assert any(t.top for r in session.rounds for t in session.lines.details(r).tokens)
        assert not any(t.top for r in run.rounds for t in r.tokens)  # memory keeps none
    assert any("a sweep of 4 runs started" in m for m in server.messages)


def test_a_paused_sweep_keeps_its_finished_runs_and_frees_the_server(server, pair):  # noqa: F811
    """Cancelled after the first run: the server stops between two rounds (a run it finished
    meanwhile still arrives), and the next request is served at once."""
    cancel = threading.Event()
    config = SweepConfig(ks=(1, 2, 3, 4), settings=Settings(max_new_tokens=24, seed=1))
    with RemoteEngine(server.address, TOKEN) as remote:
        got = remote.sweep(PROMPTS, config, cancel, on_run=lambda *a: cancel.set())
        assert got.cancelled and 1 <= len(got.runs) < got.total == 8
        assert [r.prompt_index for r in got.runs] == [0] * len(got.runs)
        again = remote.sweep(PROMPTS[:1], SweepConfig(ks=(2,), settings=Settings(max_new_tokens=4)))
        assert not again.cancelled and len(again.runs) == 1  # not "running": it stopped
    expected = run_sweep(pair, PROMPTS, config)
    assert [fates(r) for r in got.runs] == [fates(r) for r in expected.runs[: len(got.runs)]]


def test_the_sweep_request_round_trips_and_bad_ones_are_refused(server):  # noqa: F811
    from specviz.core.decoding.k_policy import PolicyConfig
    from specviz.core.drafters.registry import DrafterConfig

    variants = ((DrafterConfig("lookup", ngram_max=3), PolicyConfig("heuristic")), (None, None))
    config = SweepConfig(
        ks=(2, 5), settings=Settings(temperature=0.0, top_n=5), check_greedy=True,
        verifiers=("token", "tree2x6"),
        drafter=DrafterConfig("early-exit", exit_layer=1), policy=PolicyConfig("threshold", 0.3),
        variants=variants,
    )  # fmt: skip
    request = orjson.loads(orjson.dumps(sweep_request(PROMPTS, config, True)))
    assert config_from_json(request["config"]) == config

    def sweep(prompts=None, **config):
        obj = {"token": TOKEN, "id": 9, "op": "sweep", "prompts": prompts or [vars(PROMPTS[0])]}
        return [orjson.dumps({**obj, "config": {"ks": [1], **config}})]

    replies = raw_requests(
        server.address,
        [
            sweep(ks=[]),
            sweep(ks=[99]),
            sweep(ks=["one"]),
            sweep(colour=1),
            sweep(verifier="nonesuch"),
            sweep(drafter={"kind": "medusa"}),
            sweep(prompts=[{"category": "x"}]),
            sweep(prompts=[{"category": "x", "text": ""}]),
            [orjson.dumps({"token": TOKEN, "id": 9, "op": "hello"})],
        ],
    )
    codes = [r.get("code") for r in replies]
    assert codes == ["bad_value", "bad_value", "bad_request", "bad_request", "bad_value",
                     "bad_value", "bad_request", "bad_value", None]  # fmt: skip
    assert replies[-1]["type"] == "hello" and not replies[-1]["busy"]


def test_a_failed_run_ends_the_sweep_with_its_message(server):  # noqa: F811
    long = Prompt("long", "amen " * 5000)  # beyond the test target's context
    with RemoteEngine(server.address, TOKEN) as remote:
        with pytest.raises(P.RemoteError, match="the sweep failed: ValueError") as failed:
            remote.sweep([long], SweepConfig(ks=(1,), settings=Settings(max_new_tokens=4)))
        assert failed.value.code == "failed"
        assert (
            len(
                remote.sweep(
                    PROMPTS[:1], SweepConfig(ks=(1,), settings=Settings(max_new_tokens=2))
                ).runs
            )
            == 1
        )
