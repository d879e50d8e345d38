"""The remote worker on its QThread: a served engine (or one in a child process) gives the
window's worker signals; a lost connection is an error plus `disconnected`, never a hang."""

from __future__ import annotations

import numpy as np
import pytest
import zmq

from specviz.core.lab.position import position_distributions
from specviz.core.trace.records import Settings
from specviz.gui.session.remote_link import remote_engine_thread
from tests.test_remote import TOKEN, server  # noqa: F401  (the fixture)

TIMEOUT = 60_000


@pytest.fixture
def remote_thread(qtbot, request):
    threads = []

    def make(*args):
        thread = remote_engine_thread(*args)
        thread.worker.calibrate = False
        threads.append(thread)
        return thread

    yield make
    for thread in threads:
        assert thread.shutdown()


def test_a_served_session_through_the_worker_signals(qtbot, server, pair, remote_thread):  # noqa: F811
    engine = remote_thread(server.address, TOKEN)
    with qtbot.waitSignal(engine.loaded, timeout=TIMEOUT) as blocker:
        engine.request_load.emit("", "", "cpu", "float32")
    assert blocker.args[0].vocab_size == pair.vocab_size
    assert blocker.args[0].target == pair.target_info
    settings = Settings(seed=4, max_new_tokens=30)
    with qtbot.waitSignal(engine.session_started, timeout=TIMEOUT) as blocker:
        engine.request_start.emit("In the beginning", settings)
    header = blocker.args[0]
    for index in range(2):
        with qtbot.waitSignal(engine.round_ready, timeout=TIMEOUT) as blocker:
            engine.request_step.emit()
        assert blocker.args[0].index == index
    ids = list(header.prompt_ids)
    with qtbot.waitSignal(engine.position_ready, timeout=TIMEOUT) as blocker:
        engine.request_position.emit(ids, settings)
    assert np.array_equal(blocker.args[0].p, position_distributions(pair, ids, settings).p)
    # The greedy check runs where the models are: a token not the target's is named.
    from specviz.core.decoding.greedy_check import check_greedy

    wrong = [pair.vocab_size - 1] * 3
    with qtbot.waitSignal(engine.greedy_checked, timeout=TIMEOUT) as blocker:
        engine.request_greedy_check.emit(ids, wrong)
    n, diff = blocker.args[0]
    assert n == 3 and diff is not None and diff == check_greedy(pair, ids, wrong)
    server.stop()
    server.thread.join(timeout=10)  # it has said "bye"
    errors = []
    engine.error.connect(lambda title, message: errors.append(message))
    with qtbot.waitSignal(engine.disconnected, timeout=TIMEOUT) as blocker:
        engine.request_position.emit(ids, settings)
    assert "shut down" in blocker.args[0]
    qtbot.waitUntil(lambda: bool(errors), timeout=TIMEOUT)
    assert "rounds received so far are kept" in errors[0]


def test_the_engine_in_a_child_process(qtbot, pair_dirs, remote_thread):
    engine = remote_thread()  # no address: load() starts `specviz serve` as a child
    target, draft = (str(d) for d in pair_dirs)
    with qtbot.waitSignal(engine.loaded, timeout=TIMEOUT) as blocker:
        engine.request_load.emit(target, draft, "cpu", "float32")
    assert blocker.args[0].target_spec == target
    child = engine.link.child.proc
    with qtbot.waitSignal(engine.session_started, timeout=TIMEOUT):
        engine.request_start.emit("In the beginning", Settings(max_new_tokens=20))
    with qtbot.waitSignal(engine.round_ready, timeout=TIMEOUT) as blocker:
        engine.request_step.emit()
    assert blocker.args[0].index == 0
    assert engine.shutdown()
    assert child.poll() is not None  # the child engine ends with the window's thread


def test_shutdown_cancels_a_request_in_flight(qtbot, remote_thread):
    with zmq.Context() as context, context.socket(zmq.ROUTER) as silent:
        port = silent.bind_to_random_port("tcp://127.0.0.1")  # accepts, never answers
        engine = remote_thread(f"127.0.0.1:{port}", TOKEN)
        with qtbot.waitSignal(engine.busy, timeout=TIMEOUT, check_params_cb=bool):
            engine.request_load.emit("", "", "cpu", "float32")
        # the hello would wait 10 s; the stop event ends the wait at the next 0.1 s slice
        assert engine.shutdown(timeout_ms=5000)
        silent.close(linger=0)
