"""RemoteEngine: a `specviz serve` session driven as a local engine is (docs/protocol.md).

It gives the same records a SpeculativeEngine gives (SessionHeader, Round,
PositionDistributions), parsed from the trace lines the server sends. Not thread-safe: one
owner thread, like the engine (a ZeroMQ socket belongs to one thread). Every wait polls in
short slices with a deadline, a disconnect watch and an optional cancel check, so nothing
blocks for longer than the timeout asked for; a server that dies is noticed at once (its
connection closes) or within HEARTBEAT_TIMEOUT_MS (its machine went away).
"""

from __future__ import annotations

import collections
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from specviz.core.trace.records import Round, SessionHeader, Settings
from specviz.core.trace.serialize import settings_to_json
from specviz.remote import protocol as P
from specviz.remote.protocol import (
    HEARTBEAT_MS,
    HEARTBEAT_TIMEOUT_MS,
    QUEUED_ROUNDS,
    SOCKET_BUFFER,
    endpoint_host,
)

SLICE_S = 0.1  # how often a wait checks for a disconnect or a cancel


class Cancelled(P.RemoteError):
    """The owner asked to stop waiting (the window is closing)."""

    def __init__(self) -> None:
        super().__init__("cancelled", "cancelled")


def parse_address(address: str) -> tuple[str, int]:
    """'HOST:PORT' -> (host, port); ValueError with a message a user can act on."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--connect wants HOST:PORT (e.g. 127.0.0.1:5555), got {address!r}")
    return host.strip("[]"), int(port)


class RemoteEngine:
    """Connects and says hello (raises ConnectionLost if no server answers within
    connect_timeout, Refused for a wrong token). `info` holds the server's hello: its
    models, device and vocabulary size."""

    def __init__(
        self,
        address: str,
        token: str,
        connect_timeout: float = 10.0,
        reply_timeout: float = 600.0,
        cancel: Callable[[], bool] | None = None,
    ):
        host, port = parse_address(address)
        self.address = f"{host}:{port}"
        self.token = token
        self.reply_timeout = reply_timeout
        self.cancel = cancel
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.DEALER)
        for option, value in (
            (zmq.LINGER, 0),
            (zmq.IMMEDIATE, 1),  # queue nothing until the connection is made
            (zmq.MAXMSGSIZE, P.MAX_REPLY_BYTES),
            (zmq.RCVHWM, QUEUED_ROUNDS),
            (zmq.RCVBUF, SOCKET_BUFFER),
            (zmq.HEARTBEAT_IVL, HEARTBEAT_MS),
            (zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS),
            (zmq.HEARTBEAT_TTL, HEARTBEAT_TIMEOUT_MS),
        ):
            self.socket.setsockopt(option, value)
        self.monitor = self.socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        if ":" in host:  # an IPv6 address
            self.socket.setsockopt(zmq.IPV6, 1)
        self.socket.connect(f"tcp://{endpoint_host(host)}:{port}")
        self._poller = zmq.Poller()  # what a wait watches: replies, and a disconnect
        self._poller.register(self.socket, zmq.POLLIN)
        self._poller.register(self.monitor, zmq.POLLIN)
        self.ids = itertools.count(1)
        self.lost: str | None = None  # why the connection ended, once it has
        self.header: SessionHeader | None = None
        self.rounds_received = 0
        self.finished = False
        self._run_id: int | None = None  # the run in flight
        self._backlog: collections.deque[Any] = collections.deque()  # its rounds, read early
        self._settings_seen: dict = {}  # for round_from: rounds repeat their settings
        try:
            self.info = self._request({"op": "hello"}, connect_timeout, connecting=True)
            P.check_hello(self.info)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------------------ wire

    def _send(self, request: dict[str, Any], timeout: float, connecting: bool = False) -> int:
        if self.lost is not None:
            raise P.ConnectionLost(self.lost)
        re = next(self.ids)
        frame = P.encode({**request, "token": self.token, "id": re})
        deadline = time.monotonic() + timeout
        while True:  # IMMEDIATE: a send waits until a connection is made
            try:
                self.socket.send(frame, zmq.NOBLOCK)
                return re
            except zmq.Again:
                pass
            self._check_disconnect()  # a server gone since its last answer
            if time.monotonic() >= deadline:
                self._lose(
                    self._no_answer(timeout) if connecting else "the server is not reachable"
                )
            self._check_cancel()
            time.sleep(0.01)

    def _no_answer(self, timeout: float) -> str:
        return (
            f"no specviz server answered at {self.address} within {timeout:g} s (is "
            "`specviz serve` running there, and the SSH tunnel up?)"
        )

    def _lose(self, reason: str) -> None:
        self.lost = reason
        raise P.ConnectionLost(reason)

    def _check_disconnect(self) -> None:
        while self.monitor.poll(0):
            if recv_monitor_message(self.monitor)["event"] == zmq.EVENT_DISCONNECTED:
                self._lose("the server closed the connection (it stopped or was killed)")

    def _check_cancel(self) -> None:
        if self.cancel is not None and self.cancel():
            raise Cancelled()

    def _receive(
        self, timeout: float, connecting: bool = False, said: float | None = None
    ) -> tuple[dict, list[bytes]]:
        """The next message (JSON object, binary frames). Messages already received are
        read before a disconnect is reported. said: the timeout a failure names (the whole
        wait's, when this is what is left of it)."""
        if self.lost is not None:
            raise P.ConnectionLost(self.lost)
        deadline = time.monotonic() + timeout
        while True:
            ready = dict(
                self._poller.poll(int(1000 * max(0.0, min(SLICE_S, deadline - time.monotonic()))))
            )
            if self.socket in ready:
                frames = self.socket.recv_multipart(zmq.NOBLOCK)
                return P.decode_reply(frames), frames[1:]
            if self.monitor in ready:
                self._check_disconnect()
            if time.monotonic() >= deadline:
                if connecting:
                    self._lose(self._no_answer(said or timeout))
                self._lose(f"the server did not answer within {said or timeout:g} s")
            self._check_cancel()

    def _await(self, re: int, timeout: float, connecting: bool = False) -> tuple[dict, list]:
        """The reply to request `re` within `timeout` s in all (a ping or a stray message
        does not extend it); rounds of a run in flight go to the backlog."""
        deadline = time.monotonic() + timeout
        while True:
            message, buffers = self._receive_until(deadline, timeout, connecting)
            kind = message["type"]
            if message.get("re") == re or (kind == "round" and self._run_id is None):
                if kind == "error":
                    P.raise_error(message)
                return message, buffers
            if kind == "error" and message.get("re") is None:
                P.raise_error(message)
            if kind == "bye":
                self._lose(f"the server shut down ({message.get('reason', 'no reason given')})")
            if self._run_id is not None and (
                kind == "round" or (kind == "stopped" and message.get("re") == self._run_id)
            ):
                self._backlog.append(message)
            # anything else (a ping, a reply to a request abandoned earlier) is dropped

    def _receive_until(self, deadline: float, timeout: float, connecting: bool = False):
        """_receive with what is left of a deadline; the message says the whole timeout."""
        return self._receive(max(0.0, deadline - time.monotonic()), connecting, said=timeout)

    def _request(self, request: dict, timeout: float, connecting: bool = False) -> dict:
        re = self._send(request, timeout, connecting)
        return self._await(re, timeout, connecting)[0]

    def _round(self, message: dict) -> Round:
        number = self.rounds_received + 2
        rnd = P.round_from(message, self.header.session_id, number, self._settings_seen)
        self.rounds_received += 1
        self.finished = rnd.finish_reason is not None
        return rnd

    # ------------------------------------------------------------------------------ API

    def start(
        self,
        prompt: str,
        settings: Settings,
        calibrate: bool = True,
        trace: bool = True,
        chat: bool | None = False,
        drafting: tuple | None = None,
    ) -> SessionHeader:
        """A new session on the server (its previous one, if any, ends). chat: the prompt
        as a user turn of the target's chat template; drafting: (DrafterConfig,
        PolicyConfig), else the server's own. chat None: the server decides (a chat turn for an
        instruct target)."""
        request = {
            "op": "start",
            "prompt": prompt,
            "settings": settings_to_json(settings),
            "calibrate": calibrate,
            "trace": trace,
            "chat": chat,
            **(P.drafting_to_json(*drafting) if drafting else {}),
        }
        self._run_id, self._backlog = None, collections.deque()
        self.header = P.header_from(self._request(request, self.reply_timeout))
        self.rounds_received, self.finished = 0, False
        return self.header

    def resume(self, header: SessionHeader, received: int) -> list[Round]:
        """Drive again the server's session `header` after a dropped connection, of which
        `received` rounds arrived: the rounds made after them (none twice, none missing).
        RemoteError (code no_session) if the server no longer has it."""
        self._run_id, self._backlog = None, collections.deque()
        reply = self._request(
            {"op": "resume", "session_id": header.session_id, "received": received},
            self.reply_timeout,
        )
        self.header, self.rounds_received, self.finished = header, received, False
        rounds = reply.get("rounds")
        if type(rounds) is not list or not all(type(r) is dict for r in rounds):
            raise P.RemoteError("the server sent a bad resume reply", "bad_reply")
        missed = [self._round(obj) for obj in rounds]
        self.finished = reply.get("finished") is True
        return missed

    def step(self) -> Round:
        return self._round(self._request({"op": "step"}, self.reply_timeout))

    def run(self, max_rounds: int | None = None) -> Iterator[Round]:
        """Rounds as the server makes them, until the session finishes, max_rounds, or
        pause() (from the loop's body). The server runs ahead by a few rounds."""
        self._run_id = self._send({"op": "run", "max_rounds": max_rounds}, self.reply_timeout)
        deadline = time.monotonic() + self.reply_timeout  # a round restarts it, a ping does not
        while self._run_id is not None or self._backlog:
            if self._backlog:
                message = self._backlog.popleft()
            else:
                message = self._receive_until(deadline, self.reply_timeout)[0]
            kind, re = message["type"], message.get("re")
            if kind == "round":
                deadline = time.monotonic() + self.reply_timeout
                yield self._round(message)
            elif kind == "stopped" and re == self._run_id:
                self._run_id = None
                if message.get("reason") == "error":
                    raise P.RemoteError(f"a round failed: {message.get('message')}", "failed")
            elif kind == "error" and re in (None, self._run_id):
                self._run_id = None
                P.raise_error(message)
            elif kind == "bye":
                self._lose(f"the server shut down ({message.get('reason', 'no reason given')})")

    def wait_message(self, timeout: float) -> bool:
        """Whether the next message is here, or arrives within `timeout` s: a run's next
        round can then be read without waiting for the engine (a lost connection: True, the
        read says so)."""
        if self._backlog or self.lost is not None:
            return True
        return bool(self.socket.poll(max(0, int(1000 * timeout))))

    def pause(self) -> list[Round]:
        """Stop the run in flight; the rounds it made before it stopped (not yet yielded)."""
        self._request({"op": "pause"}, self.reply_timeout)
        rounds = [self._round(m) for m in self._backlog if m["type"] == "round"]
        self._run_id, self._backlog = None, collections.deque()
        return rounds

    def update_settings(self, settings: Settings) -> None:
        """K and sampling from the next round (the seed from the next session)."""
        self._request(
            {"op": "settings", "settings": settings_to_json(settings)}, self.reply_timeout
        )

    def continue_session(self, settings: Settings) -> None:
        """Go on after max new tokens or end-of-text, with these settings."""
        request = {"op": "continue", "settings": settings_to_json(settings)}
        self._request(request, self.reply_timeout)
        self.finished = False

    def remeasure(self) -> None:
        """A full cost-model probe after the next round."""
        self._request({"op": "remeasure"}, self.reply_timeout)

    def position(self, context_ids: list[int], settings: Settings, top_n: int = 20):
        """The full-vocabulary p and q after context_ids: a lab.position.PositionDistributions."""
        re = self._send(
            {
                "op": "position",
                "context_ids": [int(i) for i in context_ids],
                "settings": settings_to_json(settings),
                "top_n": top_n,
            },
            self.reply_timeout,
        )
        return P.position_from(*self._await(re, self.reply_timeout))

    def greedy_check(self, prompt_ids: list[int], emitted: list[int]):
        """The server's target decodes the prompt greedily: the first difference from
        `emitted` (core.decoding.greedy_check.GreedyDiff), or None. Minutes for a long one."""
        from specviz.core.decoding.greedy_check import GreedyDiff

        request = {"op": "greedy", "prompt_ids": list(prompt_ids), "emitted": list(emitted)}
        reply = self._request(request, self.reply_timeout)
        try:
            return None if reply.get("diff") is None else GreedyDiff(**reply["diff"])
        except TypeError as e:
            raise P.RemoteError(f"the server sent a bad greedy check: {e}", "bad_reply") from None

    def sweep(self, prompts, config, cancel=None, on_run=None, trace_dir=None):
        """The server sweeps K on its models (the `sweep` op; core.engine.protocol.Engine's
        sweep): on_run(done, total, SweepRun) as each run arrives; a set `cancel`
        (threading.Event) pauses the sweep between two rounds, the finished runs kept;
        trace_dir: each run's trace written here, from its rounds' lines and top-N lists."""
        from specviz.core.tune.sweep import SweepResult, keep_trace
        from specviz.remote.sweeps import run_from, sweep_request

        result = SweepResult(total=config.n_runs(len(prompts)))
        re = self._send(sweep_request(prompts, config, trace_dir is not None), self.reply_timeout)
        pause = None  # the pause request's id, once cancelled
        deadline = time.monotonic() + self.reply_timeout  # a run restarts it, a ping does not
        while True:
            if pause is None and cancel is not None and cancel.is_set():
                pause = self._send({"op": "pause"}, self.reply_timeout)
            if self.lost is None and not self.socket.poll(int(1000 * SLICE_S)):
                self._check_disconnect()
                self._check_cancel()
                if time.monotonic() >= deadline:
                    self._lose(f"the server did not answer within {self.reply_timeout:g} s")
                continue
            message = self._receive_until(deadline, self.reply_timeout)[0]
            kind = message["type"]
            if kind == "bye":
                self._lose(f"the server shut down ({message.get('reason', 'no reason given')})")
            if kind == "error" and message.get("re") in (None, re):
                P.raise_error(message)
            if message.get("re") != re:
                continue  # a ping; a reply to a request abandoned earlier
            if kind == "stopped":
                break
            if kind == "sweep_run":
                header, run = run_from(message)
                if trace_dir is not None:
                    run = keep_trace(result, header, run, trace_dir, config)
                result.runs.append(run)
                deadline = time.monotonic() + self.reply_timeout
                if on_run is not None:
                    on_run(len(result.runs), result.total, run)
        if pause is not None:
            self._await(pause, self.reply_timeout)  # its ok follows the sweep's end
        if message.get("reason") == "error":
            raise P.RemoteError(f"the sweep failed: {message.get('message')}", "failed")
        result.cancelled = message.get("reason") == "paused" or pause is not None
        return result

    def check_connection(self) -> None:
        """Between requests (none in flight, no run): raise ConnectionLost if the server
        said bye or its connection closed since the last answer. Never waits."""
        if self.lost is not None:
            raise P.ConnectionLost(self.lost)
        while self.socket.poll(0):  # idle: only a ping, a bye or a stale reply can wait
            message = P.decode_reply(self.socket.recv_multipart(zmq.NOBLOCK))
            if message["type"] == "bye":
                self._lose(f"the server shut down ({message.get('reason', 'no reason given')})")
        self._check_disconnect()

    def close(self, timeout: float = 2.0) -> None:
        """End the session on the server (best effort) and close the socket."""
        if self.socket.closed:
            return
        if self.lost is None and self.header is not None:
            try:
                self._request({"op": "close"}, timeout)
            except P.RemoteError:
                pass
        self.socket.disable_monitor()
        self.monitor.close(linger=0)
        self.socket.close(linger=0)
        self.context.term()

    def __enter__(self) -> RemoteEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
