"""The window as a front end (`specviz --connect`, `--engine process`): a served session in
the window gives the local engine's rounds; export, the distribution panel and the lab on a
position work on it; a server stopped or killed mid-run keeps the rounds (session and
autosave) and says so, with Reconnect; the GUI thread never waits on the network; a wrong
token is a clear message. 127.0.0.1 only, bounded waits."""

from __future__ import annotations

import json
import os
import signal
import threading

import numpy as np
import pytest
from PySide6.QtCore import QTimer

from specviz.cli.main import main as cli_main
from specviz.core.lab.position import position_distributions
from specviz.core.trace.files import load
from specviz.core.trace.records import Settings
from specviz.gui import dialogs
from specviz.gui.main_window import MainWindow
from specviz.gui.session.remote_link import remote_engine_thread
from specviz.remote import spawn
from specviz.remote.server import Server
from tests.test_remote import PROMPT, TOKEN, local_rounds, server, wire  # noqa: F401
from tests.test_serve_cli import TOKEN as CLI_TOKEN
from tests.test_serve_cli import serving

TIMEOUT = 60_000


@pytest.fixture(autouse=True)
def quiet(monkeypatch, tmp_path):
    monkeypatch.setattr(dialogs, "AUTO_ANSWER", True)
    monkeypatch.setattr(dialogs, "shown", [])
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def open_window(qtbot):
    windows = []

    def make(engine, specs=("", ""), wait=True) -> MainWindow:
        engine.worker.calibrate = False  # the local sessions below do not calibrate either
        window = MainWindow(specs, engine=engine)
        qtbot.addWidget(window)
        windows.append(window)
        window.show()
        if wait:
            qtbot.waitUntil(lambda: window.controller.models is not None, timeout=TIMEOUT)
        window.controls.prompt_edit.setPlainText(PROMPT)
        window.controls.seed_spin.setValue(3)
        window.controls.max_tokens_spin.setValue(40)
        return window

    yield make
    for window in windows:
        window.close_now()


def fates(rounds) -> list:
    """What a round says of its tokens (a loaded trace defers its top-N lists)."""
    return [[(r.index, t.id, t.status, t.p, t.q, t.u) for t in r.tokens] for r in rounds]


def wait_rounds(qtbot, window, n: int) -> None:
    qtbot.waitUntil(
        lambda: window.session is not None and len(window.session.rounds) >= n, timeout=TIMEOUT
    )


@pytest.mark.qt_log_ignore("This plugin does not support")
def test_the_window_on_a_served_session(qtbot, server, pair, open_window, tmp_path):  # noqa: F811
    window = open_window(remote_engine_thread(server.address, TOKEN))
    assert window.controller.models.vocab_size == pair.vocab_size
    assert "specviz serve at" not in window.status.pair.text()  # the server's pair is shown
    settings = window.controls.settings()
    window.step()
    wait_rounds(qtbot, window, 1)
    window.step()
    wait_rounds(qtbot, window, 2)
    window.toggle_run()
    qtbot.waitUntil(lambda: window.state == "finished", timeout=TIMEOUT)
    got = window.session.rounds
    expected = local_rounds(pair, settings, [None])
    assert [wire(r) for r in got] == [wire(r) for r in expected]
    # every view on it: the distribution panel, export, the lab's exact position
    assert window.distribution.selected is not None
    assert window.files.export_trace(tmp_path / "served.jsonl")
    assert fates(load(tmp_path / "served.jsonl").rounds) == fates(got)
    window.select_position(1, 0)
    window.open_lab()
    lab = window.lab.lab
    lab.request_position.emit()
    qtbot.waitUntil(lambda: getattr(lab, "position", None) is not None, timeout=TIMEOUT)
    ids = window.session.context_ids(1, 0)
    local = position_distributions(pair, ids, got[1].settings or settings)
    assert np.array_equal(lab.position.p, local.p) and np.array_equal(lab.position.q, local.q)


@pytest.mark.qt_log_ignore("This plugin does not support")
def test_a_stopped_server_keeps_the_rounds_and_offers_reconnect(qtbot, server, pair, open_window):  # noqa: F811
    window = open_window(remote_engine_thread(server.address, TOKEN))
    window.controls.max_tokens_spin.setValue(200)
    window.toggle_run()
    wait_rounds(qtbot, window, 3)
    server.stop()
    server.thread.join(timeout=10)
    link = window.connection
    qtbot.waitUntil(lambda: link.banner.isVisible(), timeout=TIMEOUT)
    kept = list(window.session.rounds)
    assert len(kept) >= 3 and window.state == "error"
    assert "connection to the engine was lost" in link.banner.text.text()
    assert f"The {len(kept)} rounds received are kept" in link.banner.text.text()
    assert link.label.text() == "connection lost" and link.action.isEnabled()
    autosaved = load(window.controller.autosaver.path)
    assert fates(autosaved.rounds) == fates(kept)
    window.step()  # not connected: said so, nothing lost
    assert "Not connected" in dialogs.shown[-1][1]
    assert window.session.rounds == kept
    # the lab falls back to the stored top-N lists
    window.select_position(0, 0)
    window.open_lab()
    window.lab.lab.request_position.emit()
    assert "stored top-N" in window.lab.lab.title
    # a server on the same port again: Reconnect keeps the rounds; Step starts anew
    server.close()  # its port is free again
    again = Server(pair, TOKEN, port=server.port)
    thread = threading.Thread(target=again.serve_forever, daemon=True)
    thread.start()
    try:
        link.banner.reconnect_button.click()
        qtbot.waitUntil(lambda: not link.banner.isVisible(), timeout=TIMEOUT)
        assert window.session.rounds == kept and window.state == "error"
        # the status bar says what the error state means, not just "error"
        state = window.status.state
        assert "Step starts anew" in state.text() and "no session" in state.toolTip()
        window.step()  # the question (answered yes) and a new session there
        qtbot.waitUntil(
            lambda: bool(window.session.rounds) and window.session.rounds != kept,
            timeout=TIMEOUT,
        )
        assert len(window.session.rounds) == 1
    finally:
        window.close_now()
        again.stop()
        thread.join(timeout=10)
        again.close()


@pytest.mark.qt_log_ignore("This plugin does not support")
def test_a_killed_server_never_blocks_the_window(qtbot, pair_dirs, open_window, tmp_path):
    with serving(pair_dirs, tmp_path) as (proc, address):
        window = open_window(remote_engine_thread(address, CLI_TOKEN))
        window.controls.max_tokens_spin.setValue(400)
        window.toggle_run()
        wait_rounds(qtbot, window, 3)
        os.kill(proc.pid, signal.SIGSTOP)  # it holds the connection and answers nothing
        try:
            qtbot.waitUntil(lambda: window.controller.waiting, timeout=TIMEOUT)
            ticks = []
            timer = QTimer()
            timer.timeout.connect(lambda: ticks.append(window.controller.waiting))
            timer.start(10)
            # the GUI thread goes on handling events while the request waits on the server
            qtbot.waitUntil(lambda: len(ticks) >= 20, timeout=5000)
            timer.stop()
            assert all(ticks)  # the request was in flight all along
        finally:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        qtbot.waitUntil(lambda: window.connection.banner.isVisible(), timeout=TIMEOUT)
        kept = len(window.session.rounds)
        assert kept >= 3 and "closed the connection" in window.connection.banner.text.text()
        assert len(load(window.controller.autosaver.path).rounds) == kept
        assert any("rounds received so far are kept" in text for _, _, text in dialogs.shown)


def test_a_wrong_token_is_a_clear_message(qtbot, server, open_window):  # noqa: F811
    window = open_window(remote_engine_thread(server.address, "guess"), wait=False)
    qtbot.waitUntil(lambda: bool(dialogs.shown), timeout=TIMEOUT)
    kind, title, text = dialogs.shown[-1]
    assert title == "Could not connect to the engine" and "wrong token" in text
    qtbot.waitUntil(lambda: window.state == "no models", timeout=TIMEOUT)
    qtbot.wait(300)
    assert len([d for d in dialogs.shown if d[0] == "error"]) == 1, dialogs.shown  # one, not two


def test_engine_process_steps_a_session(qtbot, pair_dirs, open_window):
    target, draft = (str(d) for d in pair_dirs)
    window = open_window(remote_engine_thread(), specs=(target, draft))
    assert window.controller.engine.link.child is not None
    window.step()
    wait_rounds(qtbot, window, 1)
    child = window.controller.engine.link.child.proc
    threads = child.args[child.args.index("--threads") + 1]
    assert threads == str(spawn.engine_threads())  # a core is left to the window
    window.close_now()
    assert child.poll() is not None  # the engine process ends with the window


@pytest.mark.parametrize(
    "argv, problem",
    [
        (["--connect", "nohost"], "HOST:PORT"),
        (["--connect", "127.0.0.1:5555"], "needs the server's token"),
        (["--connect", "127.0.0.1:5555", "--engine", "process"], "drop --engine"),
        (["--connect", "127.0.0.1:5555", "--target", "x"], "server's models"),
        (["--token-file", "t"], "--token-file is for --connect"),
        (["--connect", "127.0.0.1:5555", "--token", "t"], "which every local user can read"),
        (["--engine", "socket"], "invalid choice"),
    ],
)
def test_window_engine_options_are_checked(argv, problem, monkeypatch, capsys):
    monkeypatch.delenv("SPECVIZ_TOKEN", raising=False)
    monkeypatch.setattr("specviz.gui.app.main", lambda *a, **k: pytest.fail("window opened"))
    try:
        code = cli_main(argv)
    except SystemExit as e:
        code = e.code
    assert code == 2 and problem in capsys.readouterr().err


def test_window_engine_options_reach_the_window(monkeypatch):
    calls = []
    monkeypatch.setattr("specviz.gui.app.main", lambda *a, **k: calls.append(k) or 0)
    monkeypatch.setenv("SPECVIZ_TOKEN", "from-env")
    assert cli_main(["--connect", "127.0.0.1:5555"]) == 0
    assert calls[-1] == {
        "connect": "127.0.0.1:5555", "token": "from-env", "engine": "thread", "threads": None,
        "load": True, "settings": None, "prompt": None, "chat": None,
    }  # fmt: skip
    assert cli_main([]) == 0  # the window's default: its engine in a child process
    assert calls[-1]["engine"] == "process" and calls[-1]["connect"] is None
    assert cli_main(["--engine", "thread", "--threads", "1"]) == 0
    assert calls[-1]["engine"] == "thread" and calls[-1]["threads"] == 1


def test_drafting_and_load_options_reach_the_engine(qtbot, server):  # noqa: F811
    from specviz.core.decoding.k_policy import PolicyConfig
    from specviz.core.drafters.registry import DrafterConfig
    from specviz.core.models.pair import LoadOptions
    from specviz.gui.session.remote_link import child_args

    engine = remote_engine_thread(server.address, TOKEN)
    engine.worker.calibrate = False
    try:
        with qtbot.waitSignal(engine.loaded, timeout=TIMEOUT):
            engine.request_load.emit("", "", "cpu", "float32")
        engine.request_drafting.emit(DrafterConfig(kind="lookup"), PolicyConfig(kind="heuristic"))
        with qtbot.waitSignal(engine.session_started, timeout=TIMEOUT) as blocker:
            engine.request_start.emit(PROMPT, Settings())
        header = blocker.args[0]
        assert header.drafter["kind"] == "lookup" and header.policy["kind"] == "heuristic"
    finally:
        assert engine.shutdown()
    options = LoadOptions(device_map="auto", revision="v1", trust_remote_code=True)
    assert child_args(options) == ["--device-map", "auto", "--revision", "v1",
                                   "--trust-remote-code"]  # fmt: skip
    assert child_args(LoadOptions(device_map={"": 0}))[1] == '{"": 0}'


def test_an_idle_window_notices_the_server_gone(qtbot, server, open_window):  # noqa: F811
    window = open_window(remote_engine_thread(server.address, TOKEN))
    window.step()
    wait_rounds(qtbot, window, 1)
    server.stop()
    server.thread.join(timeout=10)  # it said bye; the window asks for nothing
    qtbot.waitUntil(lambda: window.connection.banner.isVisible(), timeout=TIMEOUT)
    assert "shut down" in window.connection.banner.text.text()
    assert window.state == "error" and len(window.session.rounds) == 1


def test_run_pause_step_and_settings_stream_the_local_rounds(qtbot, server, pair, open_window):  # noqa: F811
    from specviz.core.engine.speculative import SpeculativeEngine

    window = open_window(remote_engine_thread(server.address, TOKEN))
    window.controls.max_tokens_spin.setValue(80)
    window.toggle_run()  # the server streams rounds ahead of the window
    wait_rounds(qtbot, window, 3)
    window.toggle_run()  # pause: the rounds made meanwhile come with the next Steps
    qtbot.waitUntil(lambda: not window.controller.waiting, timeout=TIMEOUT)
    assert window.state == "paused"
    shown = len(window.session.rounds)
    window.step()
    wait_rounds(qtbot, window, shown + 1)
    window.controls.k_spin.setValue(2)  # from a later round on, recorded in each round
    window.toggle_run()
    qtbot.waitUntil(lambda: window.state == "finished", timeout=TIMEOUT)
    got = window.session.rounds
    assert {r.settings.k for r in got} == {4, 2}
    engine = SpeculativeEngine(pair, got[0].settings)
    engine.prefill(PROMPT, calibrate=False)
    expected = []
    for rnd in got:
        engine.update_settings(rnd.settings)
        expected.append(engine.step())
    assert [wire(r) for r in got] == [wire(r) for r in expected]
    assert [r.index for r in got] == list(range(len(got)))


def test_a_run_reaches_the_views_a_frame_at_a_time(qtbot, server, pair, open_window):  # noqa: F811
    """While running, the rounds streamed within a frame go to the views as one list (drawn
    once); every round reaches the session, the autosave and the views, in order."""
    engine = remote_engine_thread(server.address, TOKEN)
    engine.worker.frame_s = 600.0  # one frame outlasts the run: all rounds after the first
    window = open_window(engine)
    drawn = []
    window.controller.rounds_added.connect(lambda added: drawn.append([r.index for r, _ in added]))
    settings = window.controls.settings()
    window.toggle_run()
    qtbot.waitUntil(lambda: window.state == "finished", timeout=TIMEOUT)
    got = window.session.rounds
    assert [wire(r) for r in got] == [wire(r) for r in local_rounds(pair, settings, [None])]
    assert len(got) > 2 and drawn == [[0], list(range(1, len(got)))]
    assert fates(load(window.controller.autosaver.path).rounds) == fates(got)
    assert window.stream.view.round_count == len(got)
    assert window.distribution.selected[0] == len(got) - 1  # drawn once finished


def test_a_window_engine_process_leaves_a_core_to_the_window(monkeypatch, capsys):
    from specviz.core.engine import threads

    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert spawn.engine_threads() == 1
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert spawn.engine_threads() == 15
    with pytest.raises(SystemExit) as refused:
        cli_main(["serve", "--threads", "0", "--port", "0"])
    assert refused.value.code == 2
    assert "--threads: must be between 1 and 1024, got 0" in capsys.readouterr().err


def prompts_file(tmp_path, n: int) -> str:
    path = tmp_path / "prompts.jsonl"
    rows = [{"category": f"c{i % 2}", "prompt": f"{PROMPT} {i}"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def sweep_in(qtbot, window, path: str, ks: tuple[int, int], tokens: int):
    """Open Tune and start a sweep of the prompt file; the panel."""
    window.tune.open()
    panel = window.tune.panel
    panel.set_prompt_file(path)
    panel.k_from.setValue(ks[0])
    panel.k_to.setValue(ks[1])
    panel.tokens.setValue(tokens)
    assert panel.run_job is not None and panel.start_sweep(), panel.status.text()
    return panel


@pytest.mark.qt_log_ignore("This plugin does not support")
def test_a_connected_window_sweeps_there(qtbot, server, open_window, tmp_path):  # noqa: F811
    """--connect: the sweep is the served engine's `sweep` op, its runs the server's, their
    traces written here; the session goes on afterwards; the advisor follows it."""
    window = open_window(remote_engine_thread(server.address, TOKEN))
    window.step()
    wait_rounds(qtbot, window, 1)
    panel = sweep_in(qtbot, window, prompts_file(tmp_path, 1), (1, 2), 6)
    qtbot.waitUntil(lambda: not panel.sweeping, timeout=TIMEOUT)
    assert panel.status.text().startswith("done: 2 of 2"), panel.status.text()
    assert any("a sweep of 2 runs started" in m for m in server.messages)
    assert all(load(r.trace_path).rounds for r in panel.result.runs)
    window.step()  # the session was paused for the sweep: it goes on
    wait_rounds(qtbot, window, 2)
    qtbot.waitUntil(lambda: len(panel.model.rounds) == 2, timeout=TIMEOUT)
    window.tune.close()


@pytest.mark.qt_log_ignore("This plugin does not support")
def test_a_child_engines_sweep_loads_no_second_pair_here(qtbot, open_window, monkeypatch, tmp_path):
    """--engine process (the default), builtin:tiny (issue 32 item 5): the Tune sweep goes
    through the engine, so this process loads no pair (the loader is watched); cancelled
    mid-sweep, the runs that finished stay, their traces replayable."""
    from specviz.core.models import pair as pair_module
    from specviz.core.models import spec as spec_module

    loads = []

    def watched(load):
        def load_here(*args, **kwargs):
            loads.append(threading.current_thread().name)
            return load(*args, **kwargs)

        return load_here

    monkeypatch.setattr(spec_module.PairSpec, "load", watched(spec_module.PairSpec.load))
    monkeypatch.setattr(spec_module, "load_pair", watched(spec_module.load_pair))
    monkeypatch.setattr(pair_module, "load_pair", watched(pair_module.load_pair))
    window = open_window(remote_engine_thread(), specs=("builtin:tiny", "builtin:tiny"))
    assert window.controller.engine.link.child is not None
    panel = sweep_in(qtbot, window, prompts_file(tmp_path, 2), (1, 4), 24)
    qtbot.waitUntil(lambda: len(panel.result.runs) > 0, timeout=TIMEOUT)
    panel.cancel_button.click()
    qtbot.waitUntil(lambda: not panel.sweeping, timeout=TIMEOUT)
    result = panel.result
    assert result.cancelled and 1 <= len(result.runs) < result.total == 8
    assert panel.status.text().startswith(f"cancelled: {len(result.runs)} of 8 runs")
    assert {r.prompt_index for r in result.runs} <= {0, 1} and panel.table.rowCount() >= 1
    traced = load(result.runs[0].trace_path)
    assert [[t.id for t in r.tokens] for r in traced.rounds] == [
        [t.id for t in r.tokens] for r in result.runs[0].rounds
    ]
    assert loads == []  # not one pair loaded in the window's process
    window.step()  # the engine is free again
    wait_rounds(qtbot, window, 1)
    window.tune.close()


class Proxy:
    """A TCP relay to a port on 127.0.0.1: drop() cuts every connection through it (as a
    dropped SSH tunnel) while the server lives; new connections are relayed again."""

    def __init__(self, port: int):
        import socket

        self.port, self.conns, self.lock = port, [], threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.port))
            with self.lock:
                self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b) -> None:
        import socket

        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        a.close()  # each pump closes the socket it reads

    def drop(self) -> None:
        import socket

        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:  # the pumps see the end and close them
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.listener.close()
        self.drop()


@pytest.mark.qt_log_ignore("This plugin does not support")
def test_reconnect_resumes_the_servers_session(qtbot, server, pair, open_window):  # noqa: F811
    """A dropped connection (the server lives): Reconnect resumes the server's session, the
    rounds it made meanwhile are added (none twice) and Step goes on, as the local engine."""
    proxy = Proxy(server.port)
    try:
        window = open_window(remote_engine_thread(proxy.address, TOKEN))
        settings = window.controls.settings()
        window.toggle_run()
        wait_rounds(qtbot, window, 2)
        proxy.drop()
        link = window.connection
        qtbot.waitUntil(lambda: link.banner.isVisible(), timeout=TIMEOUT)
        kept = len(window.session.rounds)
        qtbot.waitUntil(lambda: any("went away" in m for m in server.messages), timeout=TIMEOUT)
        link.reconnect()
        qtbot.waitUntil(lambda: window.state == "paused", timeout=TIMEOUT)
        assert not link.banner.isVisible() and len(window.session.rounds) >= kept
        assert any("resumed" in m for m in server.messages)
        window.toggle_run()
        qtbot.waitUntil(lambda: window.state == "finished", timeout=TIMEOUT)
        got = window.session.rounds
        assert [wire(r) for r in got] == [wire(r) for r in local_rounds(pair, settings, [None])]
        assert fates(load(window.controller.autosaver.path).rounds) == fates(got)
    finally:
        proxy.close()
