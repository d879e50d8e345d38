"""The worker on its QThread, driven with qtbot.waitSignal on the small test models."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import Qt

from specviz.core.trace.records import Settings
from specviz.core.trace.session import Session
from specviz.gui.session.worker import EngineThread

TIMEOUT = 60_000


@pytest.fixture
def engine(qtbot):
    thread = EngineThread()
    thread.worker.calibrate = False  # the step-time measurement is tested with the window
    yield thread
    assert thread.shutdown()


def _load(qtbot, engine, pair_dirs):
    target, draft = (str(d) for d in pair_dirs)
    with qtbot.waitSignal(engine.loaded, timeout=TIMEOUT) as blocker:
        engine.request_load.emit(target, draft, "cpu", "float32")
    return blocker.args[0]


def test_load_start_and_step_on_the_worker_thread(qtbot, engine, pair_dirs):
    info = _load(qtbot, engine, pair_dirs)
    assert info.device == "cpu" and info.vocab_size > 0
    assert info.target.params > info.draft.params
    threads = []
    engine.worker.round_ready.connect(  # a direct connection runs on the emitting thread
        lambda _: threads.append(threading.current_thread()), Qt.ConnectionType.DirectConnection
    )
    settings = Settings(k=3, temperature=1.0, seed=1, max_new_tokens=40)
    with qtbot.waitSignal(engine.session_started, timeout=TIMEOUT) as blocker:
        engine.request_start.emit("In the beginning God", settings)
    session = Session(blocker.args[0])
    assert session.header.settings == settings
    for index in range(3):
        with qtbot.waitSignal(engine.round_ready, timeout=TIMEOUT) as blocker:
            engine.request_step.emit()
        rnd = blocker.args[0]
        assert rnd.index == index and session.append(rnd)
        assert rnd.n_drafted <= 3
    # a settings change applies from the next round
    with qtbot.waitSignal(engine.round_ready, timeout=TIMEOUT) as blocker:
        engine.request_settings.emit(Settings(k=1, temperature=1.0, max_new_tokens=40))
        engine.request_step.emit()
    assert blocker.args[0].n_drafted <= 1 and blocker.args[0].settings.k == 1
    assert engine.link.session.settings.seed == 1  # the seed belongs to the session
    assert threads and all(t is not threading.main_thread() for t in threads)


def test_busy_messages_while_loading(qtbot, engine, pair_dirs):
    messages = []
    engine.busy.connect(messages.append)
    _load(qtbot, engine, pair_dirs)
    qtbot.waitUntil(lambda: messages and messages[-1] == "", timeout=TIMEOUT)
    assert any(m.startswith("loading") for m in messages)


def test_load_error_is_a_readable_signal(qtbot, engine, tmp_path):
    missing = str(tmp_path / "no-such-model")
    with qtbot.waitSignal(engine.error, timeout=TIMEOUT) as blocker:
        engine.request_load.emit(missing, missing, "cpu", "float32")
    title, message = blocker.args
    assert title == "Could not load the models"
    assert "does not exist" in message and "open" in message.lower()
    # no pair: starting a session says what to do instead of failing
    with qtbot.waitSignal(engine.error, timeout=TIMEOUT) as blocker:
        engine.request_start.emit("hello", Settings())
    assert blocker.args[0] == "No models loaded"


def test_bad_prompt_and_bad_step_keep_the_worker_alive(qtbot, engine, pair_dirs):
    _load(qtbot, engine, pair_dirs)
    with qtbot.waitSignal(engine.error, timeout=TIMEOUT) as blocker:
        engine.request_start.emit("   ", Settings())
    assert blocker.args[0] == "Could not start the session" and "empty" in blocker.args[1]
    with qtbot.waitSignal(engine.session_started, timeout=TIMEOUT):
        engine.request_start.emit("A fool and his", Settings(k=2))

    def broken():
        raise RuntimeError("simulated failure")

    engine.link.session.step = broken
    with qtbot.waitSignal(engine.error, timeout=TIMEOUT) as blocker:
        engine.request_step.emit()
    assert blocker.args[0] == "A round failed" and "simulated failure" in blocker.args[1]
    assert engine.link.session is None  # the next Step starts a new session
    with qtbot.waitSignal(engine.session_started, timeout=TIMEOUT):
        engine.request_start.emit("A fool and his", Settings(k=2))
    with qtbot.waitSignal(engine.round_ready, timeout=TIMEOUT):
        engine.request_step.emit()


def test_compute_position_for_the_lab(qtbot, engine, pair_dirs):
    info = _load(qtbot, engine, pair_dirs)
    with qtbot.waitSignal(engine.position_ready, timeout=TIMEOUT) as blocker:
        engine.request_position.emit([5, 6, 7], Settings(temperature=0.7, top_k=20))
    result = blocker.args[0]
    assert result.p.shape == result.q.shape == result.p_raw.shape == (info.vocab_size,)
    assert result.p.sum() == pytest.approx(1) and (result.p > 0).sum() <= 20


def test_shutdown_stops_between_rounds(qtbot, pair_dirs):
    engine = EngineThread()
    engine.worker.calibrate = False
    _load(qtbot, engine, pair_dirs)
    with qtbot.waitSignal(engine.session_started, timeout=TIMEOUT):
        engine.request_start.emit("The quick brown fox", Settings(max_new_tokens=200))
    for _ in range(50):
        engine.request_step.emit()  # a queue of requests: the stop skips what is left
    assert engine.shutdown(TIMEOUT)
    assert engine.thread.isFinished()
    assert engine.link.session.round_index < 50
    assert engine.shutdown()  # idempotent
