"""`specviz serve` in a child process and `specviz run --connect` against it, over 127.0.0.1:
the same trace as a local run, a server killed mid-run, a wrong token, a port in use."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading

import pytest

from specviz.cli.main import main
from specviz.core.trace.files import load
from tests.test_remote import wire

TOKEN = "cli-token"
WAIT_S = 120  # a child's model load on a busy machine


def child_env(token: str = "") -> dict:
    # One torch thread, as conftest gives this process: the same floats on both sides.
    return {**os.environ, "OMP_NUM_THREADS": "1", "SPECVIZ_TOKEN": token, "NO_COLOR": "1"}


def lines_of(stream) -> queue.Queue:
    """A child's output, line by line, read on a thread so that a wait can time out."""
    lines: queue.Queue = queue.Queue()

    def pump():
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def wait_for(lines: queue.Queue, start: str, count: int = 1) -> list[str]:
    seen = []
    while len(seen) < count:
        line = lines.get(timeout=WAIT_S)
        assert line is not None, f"the child ended before printing {start!r}"
        if line.startswith(start):
            seen.append(line)
    return seen


def pair_args(pair_dirs) -> list[str]:
    return ["--target", str(pair_dirs[0]), "--draft", str(pair_dirs[1])]


def start(command: list[str], err_path, token: str = "") -> tuple[subprocess.Popen, queue.Queue]:
    """A child with its stdout read line by line and its stderr in a file; token: its
    $SPECVIZ_TOKEN (a token never goes on a command line)."""
    with open(err_path, "w") as err:
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=err, text=True, env=child_env(token)
        )
    return proc, lines_of(proc.stdout)


def finish(proc: subprocess.Popen, err_path) -> str:
    proc.wait(timeout=30)
    proc.stdout.close()
    return err_path.read_text()


@contextlib.contextmanager
def serving(pair_dirs, folder):
    """(the server's process, its HOST:PORT); stopped with SIGTERM after, unless killed."""
    command = [sys.executable, "-m", "specviz", "serve", *pair_args(pair_dirs)]
    proc, out = start([*command, "--port", "0"], folder / "serve.err", token=TOKEN)
    try:
        line = wait_for(out, "specviz serve: listening on")[0]
        said = out.get(timeout=10)
        assert "token: from $SPECVIZ_TOKEN" in said and TOKEN not in said  # never printed
        yield proc, line.split()[-1]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        err = finish(proc, folder / "serve.err")
        assert "Traceback" not in err, err
        assert proc.returncode in (0, -signal.SIGKILL), err


@pytest.fixture(scope="module")
def served(pair_dirs, tmp_path_factory):
    """One server for the tests that leave it running."""
    with serving(pair_dirs, tmp_path_factory.mktemp("serve")) as server:
        yield server


@pytest.mark.parametrize("drafting", [[], ["--drafter", "lookup", "--policy", "heuristic"]])
def test_run_connect_writes_the_local_runs_trace(
    served, pair_dirs, tmp_path, capsys, drafting, monkeypatch
):
    proc, address = served
    monkeypatch.setenv("SPECVIZ_TOKEN", TOKEN)
    common = ["--seed", "2", "--max-new-tokens", "40", "--quiet", *drafting]
    remote, local = tmp_path / "remote.jsonl", tmp_path / "local.jsonl"
    code = main(["run", "--connect", address, *common, "--trace", str(remote)])
    out_remote, err = capsys.readouterr()
    assert code == 0, err
    models = pair_args(pair_dirs)[: 2 if drafting else 4]  # lookup: no draft model
    assert main(["run", *models, *common, "--trace", str(local)]) == 0
    out_local, _ = capsys.readouterr()
    got, expected = load(remote), load(local)
    assert len(got.rounds) == len(expected.rounds) > 3
    assert [wire(r) for r in got.rounds] == [wire(r) for r in expected.rounds]
    assert got.header.prompt_ids == expected.header.prompt_ids
    assert got.header.target.params == expected.header.target.params
    assert (got.header.drafter, got.header.policy) == (
        expected.header.drafter,
        expected.header.policy,
    )
    assert got.header.drafter["kind"] == ("lookup" if drafting else "model")
    first = lambda text: text.splitlines()[0].split("tokens/forward")[0]  # noqa: E731
    assert first(out_remote) == first(out_local)  # rounds and tokens


def test_a_server_killed_mid_run_leaves_the_rounds_received(pair_dirs, tmp_path):
    with serving(pair_dirs, tmp_path) as (server, address):
        killed_mid_run(server, address, tmp_path)


def killed_mid_run(server, address, tmp_path):
    trace = tmp_path / "t.jsonl"
    client, out = start(
        [sys.executable, "-m", "specviz", "run", "--connect", address]
        + ["--max-new-tokens", "200", "--trace", str(trace)],
        tmp_path / "client.err",
        token=TOKEN,
    )
    try:
        wait_for(out, "round ", 3)
        # Frozen, the client stops reading; the server can get only a few rounds ahead.
        client.send_signal(signal.SIGSTOP)
        server.kill()
        server.wait(timeout=30)
        client.send_signal(signal.SIGCONT)
        client.wait(timeout=WAIT_S)
    finally:
        client.kill()
        err = finish(client, tmp_path / "client.err")
    assert client.returncode == 1, err
    assert "Traceback" not in err
    assert "the server closed the connection" in err and "received are kept" in err
    session = load(trace)
    assert len(session.rounds) >= 3 and not session.finished
    assert f"the {len(session.rounds)} rounds received" in err


def test_a_wrong_token_is_refused(served, capsys, monkeypatch):
    _, address = served
    monkeypatch.setenv("SPECVIZ_TOKEN", "nope")
    code = main(["run", "--connect", address, "--quiet"])
    _, err = capsys.readouterr()
    assert code == 2 and "wrong token" in err and "Traceback" not in err


def test_the_token_never_goes_on_a_command_line(served, capsys, monkeypatch, tmp_path):
    """--token is refused (every local user reads /proc/PID/cmdline); --token-file takes a
    file only its owner can read, and refuses one that others can."""
    _, address = served
    monkeypatch.delenv("SPECVIZ_TOKEN", raising=False)
    assert main(["run", "--connect", address, "--token", TOKEN, "--quiet"]) == 2
    assert "which every local user can read" in capsys.readouterr().err
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o644)
    assert main(["run", "--connect", address, "--token-file", str(path), "--quiet"]) == 2
    assert "lets other users read it; chmod 600" in capsys.readouterr().err
    path.chmod(0o600)
    args = ["--token-file", str(path), "--quiet", "--max-new-tokens", "4"]
    assert main(["run", "--connect", address, *args]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["serve", "--token", "x", "--pair", "tiny"]) == 2
    assert "which every local user can read" in capsys.readouterr().err


def test_serve_writes_a_new_token_to_a_0600_file_and_prints_its_path(pair_dirs, tmp_path):
    import stat

    command = [sys.executable, "-m", "specviz", "serve", *pair_args(pair_dirs), "--port", "0"]
    path = tmp_path / "serve.token"
    proc, out = start([*command, "--token-file", str(path)], tmp_path / "serve.err")
    try:
        wait_for(out, "specviz serve: listening on")
        said = out.get(timeout=10) + out.get(timeout=10)
        token = path.read_text().strip()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(token) >= 32
        assert str(path) in said and token not in said  # where it is, not what it is
        assert f"--token-file {path}" in said
    finally:
        proc.send_signal(signal.SIGTERM)
        finish(proc, tmp_path / "serve.err")


def test_a_port_in_use_is_reported_before_loading(served, capsys):
    _, address = served
    port = address.rsplit(":", 1)[1]
    code = main(["serve", "--target", "/nowhere/t", "--draft", "/nowhere/d", "--port", port])
    _, err = capsys.readouterr()
    assert code == 2 and f"port {port} on 127.0.0.1 is in use" in err


@pytest.mark.parametrize(
    "args,message",
    [
        (["--target", "a", "--draft", "b"], "drop --target/--draft/--pair"),
        ([], "--connect needs the server's token"),
        (["--timeout", "0"], "--timeout must be > 0"),
        (["--connect", "nowhere"], "HOST:PORT"),
    ],
)
def test_bad_connect_flags(capsys, monkeypatch, args, message):
    if message == "--connect needs the server's token":
        monkeypatch.delenv("SPECVIZ_TOKEN", raising=False)
    else:
        monkeypatch.setenv("SPECVIZ_TOKEN", "t")
    argv = ["run", *(["--connect", "127.0.0.1:9"] if "--connect" not in args else []), *args]
    code = main(argv)
    _, err = capsys.readouterr()
    assert code == 2 and message in err, err


def test_a_child_engine_stops_when_its_parent_goes(pair_dirs):
    from specviz.core.trace.records import Settings
    from specviz.remote.client import RemoteEngine
    from specviz.remote.protocol import ConnectionLost
    from specviz.remote.spawn import ChildServer

    child = ChildServer(str(pair_dirs[0]), str(pair_dirs[1]), timeout=WAIT_S)
    try:
        with RemoteEngine(child.address, child.token) as remote:
            remote.start("In the beginning", Settings(), calibrate=False)
            assert remote.step().index == 0
            child.proc.stdin.close()  # what the parent's death does to the pipe
            assert child.proc.wait(timeout=30) == 0
            with pytest.raises(ConnectionLost, match="shut down|closed the connection"):
                remote.step()
    finally:
        child.stop()


@pytest.mark.parametrize(
    "args",
    [
        ["--connect", "127.0.0.1:5555"],
        ["--connect", "nowhere", "--token", "t"],
        ["--connect", "127.0.0.1:5555", "--token-file", "/nowhere/token"],
        ["--connect", "127.0.0.1:5555", "--pair", "tiny"],
    ],
)
def test_run_and_the_window_check_connect_flags_alike(capsys, monkeypatch, args):
    """--connect/--token are defined and checked once (cli/session/run_connected.py)."""
    monkeypatch.delenv("SPECVIZ_TOKEN", raising=False)
    monkeypatch.setattr("specviz.gui.app.main", lambda *a, **k: pytest.fail("window opened"))
    errors = []
    for argv in (["run", *args], args):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
        errors.append((code, capsys.readouterr().err.strip()))
    assert errors[0] == errors[1] and errors[0][0] == 2, errors


def test_a_child_engine_cancelled_while_starting_is_no_error(pair_dirs):
    """A window closing while its engine process starts cancels the wait: Cancelled, which
    the window reports to no one (a ConnectionLost("cancelled") became an error message
    on the way out)."""
    from specviz.remote.client import Cancelled
    from specviz.remote.spawn import ChildServer

    with pytest.raises(Cancelled):
        ChildServer(str(pair_dirs[0]), str(pair_dirs[1]), timeout=WAIT_S, cancel=lambda: True)
