"""The session host (core.host): one place a session is opened, one implementation of the
Engine's session operations, and the server a transport over it: a served session and an
in-process one, driven by the same calls, give the same rounds and the same refusals."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from specviz.core.host.session_host import HostError, SessionHost
from specviz.core.trace.records import Settings
from specviz.remote import protocol as P
from specviz.remote.client import RemoteEngine
from tests.test_remote import PROMPT, TOKEN, server, wire  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[1]

# What a session is made of and what a session operation does: the server's modules, which
# parse, call the host and frame (core.host.session_host), may neither import nor name them...
SESSION_LOGIC = {
    "SpeculativeEngine",  # building a session
    "session_prompt",  # reading its prompt (a chat turn)
    "position_distributions",  # the lab's position
    "make_drafter",
    "check_greedy",  # the greedy check
    "sweep_steps",  # a sweep's runs (the host's own sweep_steps is an attribute)
    "run_sweep",
}
# ... nor reach into a session's state
SESSION_STATE = {"prefill", "finish_reason", "prober"}
TRANSPORT = ("server.py", "queries.py", "sweeps.py", "tp_follower.py")


def _names(source: str) -> tuple[set[str], set[str]]:
    """(the names and imported names, the attributes) a module's code uses."""
    names, attributes = set(), set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            attributes.add(node.attr)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names.update(alias.name.rsplit(".", 1)[-1] for alias in node.names)
    return names, attributes


def test_the_server_holds_no_session_logic():
    for name in TRANSPORT:
        names, attributes = _names((ROOT / "specviz" / "remote" / name).read_text("utf-8"))
        found = (names & SESSION_LOGIC) | (attributes & SESSION_STATE)
        assert not found, f"remote/{name} does a session's work itself: {sorted(found)}"


def test_every_session_is_opened_by_the_host():
    """SpeculativeEngine( appears once in specviz: in the host's opener (the window, run,
    serve, tune's sweeps and curves and bench all open their sessions there)."""
    makers = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "specviz").rglob("*.py")
        if "SpeculativeEngine(" in p.read_text(encoding="utf-8")
    ]
    assert makers == ["specviz/core/host/opening.py"]


def _drive(engine) -> tuple[list, list[tuple[str, str]]]:
    """The same calls on either engine: (the rounds, the (code, message) of each refusal)."""
    settings = Settings(seed=3, max_new_tokens=24)
    refusals = []

    def refused(call, *args):
        try:
            call(*args)
        except (HostError, P.RemoteError) as e:
            refusals.append((e.code, str(e)))
        else:
            refusals.append(("", ""))

    refused(engine.step)  # no session yet
    refused(engine.remeasure)
    engine.start(PROMPT, settings, calibrate=False)
    rounds = [engine.step(), engine.step()]
    refused(engine.continue_session, settings)  # it has not ended
    engine.update_settings(dataclasses.replace(settings, k=2, temperature=0.7))
    rounds += list(engine.run())
    assert engine.finished
    refused(engine.step)  # finished
    engine.continue_session(dataclasses.replace(settings, max_new_tokens=40))
    rounds += list(engine.run(max_rounds=3))
    engine.remeasure()
    rounds += list(engine.run())
    return rounds, refusals


def test_a_served_session_is_the_hosts_round_for_round(server, pair):  # noqa: F811
    """The server carries out each request through the host: the same calls give the same
    rounds, and the host's refusals cross the wire with their code and text."""
    with RemoteEngine(server.address, TOKEN) as remote:
        got, got_refusals = _drive(remote)
        ids = list(pair.tokenizer(PROMPT)["input_ids"])
        settings = Settings(temperature=0.8)
        served_position = remote.position(ids, settings, top_n=5)
        emitted = [t.id for r in got for t in r.tokens if t.emitted][:6]
        served_greedy = remote.greedy_check(ids, emitted)
    host = SessionHost(pair)
    expected, refusals = _drive(host)
    assert len(got) == len(expected) > 6
    assert [wire(r) for r in got] == [wire(r) for r in expected]
    assert got_refusals == refusals
    assert [code for code, _ in refusals] == ["no_session", "no_session", "cannot_continue",
                                              "finished"]  # fmt: skip
    position = host.position(ids, settings, top_n=5)
    for name in P.POSITION_ARRAYS:
        assert np.array_equal(getattr(served_position, name), getattr(position, name))
    assert served_greedy == host.greedy_check(ids, emitted)


def test_a_failed_round_drops_the_session(pair):
    host = SessionHost(pair)
    host.start(PROMPT, Settings(seed=1, max_new_tokens=12), calibrate=False)

    def broken():
        raise RuntimeError("a half-done round")

    host.session.step = broken
    with pytest.raises(RuntimeError):
        host.step()
    assert host.session is None and host.header is None
    with pytest.raises(HostError, match="no session") as refused:
        list(host.run())
    assert refused.value.code == "no_session"


def test_a_start_refused_at_its_prompt_keeps_the_session(pair):
    """The previous session is dropped only once the new prompt is read: a chat turn the
    target has no template for leaves it as it was."""
    host = SessionHost(pair)
    header = host.start(PROMPT, Settings(seed=1, max_new_tokens=12), calibrate=False)
    with pytest.raises(ValueError, match="template"):
        host.start(PROMPT, Settings(), calibrate=False, chat=True)
    assert host.header is header and host.step().index == 0
    with pytest.raises(ValueError, match="outside the vocabulary"):
        host.position([pair.vocab_size], Settings())
