"""The session host (core.host.session_host) behind a ZeroMQ ROUTER socket (docs/protocol.md):
a transport. Each request is parsed (remote.protocol), carried out by the host, and its
result or the host's refusal (a HostError, whose code is the protocol's) framed as the reply;
the server keeps only what a connection needs: who drives, the run in progress, the round
lines sent (for a client that resumes) and the replies waiting for a slow reader. One thread
polls the socket, answers requests, and during a `run` (or a `sweep`) steps a round between
polls, so a pause, a settings change or a position is answered between two rounds. One
client (the one that started the session) drives it; another gets "busy" until it closes
its session or goes away. Nothing a client sends can stop the server: every fault becomes
an error reply and a log line."""

from __future__ import annotations

import collections
import dataclasses
import os
import threading
from collections.abc import Callable
from typing import Any

import orjson
import zmq

from specviz import __version__
from specviz.core.host.session_host import HostError, SessionHost
from specviz.core.models.chat import pair_instruct_reason
from specviz.remote import protocol as P
from specviz.remote.burst_log import BurstLog
from specviz.remote.protocol import (
    HEARTBEAT_MS,
    HEARTBEAT_TIMEOUT_MS,
    QUEUED_ROUNDS,
    SOCKET_BUFFER,
    endpoint_host,
)
from specviz.remote.queries import ModelQueries
from specviz.remote.sweeps import SweepOps

# Replies waiting for a client that does not read them, at most; past that the client's new
# requests are dropped unanswered (and logged, a line per burst) until it reads: every request
# gets its reply or is dropped before it does anything (docs/protocol.md, Limits).
MAX_WAITING = 16


class ServeError(Exception):
    """The server cannot start (port in use, bad host): one line for the user."""


def bind_address(socket: zmq.Socket, host: str, port: int) -> int:
    """Bind socket to host:port (port 0: any free port); the port it got."""
    if ":" in host:  # an IPv6 address
        socket.setsockopt(zmq.IPV6, 1)
    try:
        socket.bind(f"tcp://{endpoint_host(host)}:{port if port else '*'}")
    except zmq.ZMQError as e:
        if e.errno == zmq.EADDRINUSE:
            raise ServeError(
                f"port {port} on {host} is in use (another `specviz serve`?): pick another "
                "--port, or --port 0 for any free one"
            ) from None
        raise ServeError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    return int(socket.getsockopt_string(zmq.LAST_ENDPOINT).rsplit(":", 1)[1])


RECEIVE_QUEUE = 8  # messages a peer may have waiting for the server, at most


class Server(ModelQueries, SweepOps):
    """Serves one loaded ModelPair through its SessionHost (`host`). Construct (binds), then
    serve_forever() on one thread; stop() from any thread; close() on the serving thread
    after it returns."""

    def __init__(
        self,
        pair: Any,
        token: str,
        host: str = "127.0.0.1",
        port: int = 0,
        specs: tuple[str, str] = ("", ""),
        log: Callable[[str], None] = lambda message: None,
        stop_fd: int | None = None,
        drafting: tuple | None = None,
    ):
        from specviz.core.decoding.k_policy import PolicyConfig
        from specviz.core.drafters.registry import DrafterConfig

        self.token, self.address_host, self.specs, self.log = token, host, specs, log
        # the pair's sessions; drafting: the drafter and policy of a start that names none;
        # its chat (serve --chat/--no-chat): for a client that does not say
        self.host = SessionHost(pair, drafting or (DrafterConfig(), PolicyConfig()))
        self.stop_fd = stop_fd  # a pipe from a parent process: its end (EOF) stops the server
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.ROUTER)
        for option, value in (
            (zmq.ROUTER_MANDATORY, 1),  # a send to a client that went away raises
            # Inbound, before any token is checked: a frame over twice the request limit
            # drops its peer unread, and each peer queues at most RECEIVE_QUEUE messages
            # (three peers flooding 900 KB requests grew the server by 470 MB without).
            (zmq.MAXMSGSIZE, 2 * P.MAX_REQUEST_BYTES),
            (zmq.RCVHWM, RECEIVE_QUEUE),
            (zmq.RCVBUF, SOCKET_BUFFER),
            (zmq.SNDHWM, QUEUED_ROUNDS),
            (zmq.SNDBUF, SOCKET_BUFFER),
            (zmq.LINGER, 0),
            (zmq.HEARTBEAT_IVL, HEARTBEAT_MS),
            (zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS),
            (zmq.HEARTBEAT_TTL, HEARTBEAT_TIMEOUT_MS),
        ):
            self.socket.setsockopt(option, value)
        try:
            self.port = bind_address(self.socket, host, port)
        except ServeError:
            self.close()
            raise
        self.stop_event = threading.Event()
        self.owner: bytes | None = None  # the client that drives the session
        self.mirror = None  # a split target's: each op broadcast to the other ranks first
        self.run_state: dict[str, Any] | None = None  # {"re", "max", "count"} while running
        self.sent: list[bytes] = []  # the session's round lines, for a client that resumes it
        # Messages ZeroMQ could not take yet, per client, sent in order before anything new.
        self.outboxes: dict[bytes, collections.deque[list[bytes]]] = {}
        self._burst = BurstLog(lambda message: self.log(message))  # one line per burst

    @property
    def pair(self):
        return self.host.pair

    @pair.setter
    def pair(self, pair) -> None:
        """The pair (loaded after the socket is bound: a port in use is said at once)."""
        self.host = SessionHost(pair, self.host.drafting, self.host.chat)

    # ------------------------------------------------------------------------------ loop

    def serve_forever(self) -> None:
        poller = zmq.Poller()
        poller.register(self.socket, zmq.POLLIN)
        if self.stop_fd is not None:
            poller.register(self.stop_fd, zmq.POLLIN)
        while not self.stop_event.is_set():
            if self.outboxes:
                timeout = 1  # a queue is full: try again soon (ROUTER has no POLLOUT per peer)
            else:
                timeout = 0 if self.run_state is not None else 200
            ready = dict(poller.poll(timeout))
            if self.stop_fd in ready and not os.read(self.stop_fd, 4096):
                self.log("the parent process has gone: stopping")
                break
            if self.socket in ready:
                self._read_requests()
            if self.outboxes:
                self._flush()
            if self.run_state is not None and self.owner not in self.outboxes:
                self.run_state.get("step", self._run_one)()  # a round of a run or a sweep
        if self.owner is not None:
            self._flush()
            self._send(self.owner, [P.encode({"type": "bye", "reason": "the server stopped"})])
        self._tell("stop")

    def stop(self) -> None:
        self.stop_event.set()

    def close(self) -> None:
        self.socket.close(linger=0)
        self.context.term()

    def _read_requests(self) -> None:
        for _ in range(64):  # then step the run again: requests cannot starve it
            try:
                ident, *frames = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._handle(ident, frames)

    # ------------------------------------------------------------------------------ sends

    def _send(self, ident: bytes, frames: list[bytes]) -> bool:
        """Send, or queue behind what waits for that peer; False if the peer is gone.

        ZeroMQ refuses a send (EAGAIN) when the peer's queue is full, and now and then just
        after it was full, until the reader's acknowledgement arrives: nothing is dropped."""
        waiting = self.outboxes.get(ident)
        if waiting is not None:
            waiting.append(frames)  # bounded: _handle drops requests past MAX_WAITING
            return True
        try:
            self.socket.send_multipart([ident, *frames], zmq.NOBLOCK)
        except zmq.Again:
            self.outboxes[ident] = collections.deque([frames])
        except zmq.ZMQError as e:
            if e.errno != zmq.EHOSTUNREACH:
                raise
            self._gone(ident)
            return False
        return True

    def _flush(self) -> None:
        for ident, waiting in list(self.outboxes.items()):
            while waiting:
                try:
                    self.socket.send_multipart([ident, *waiting[0]], zmq.NOBLOCK)
                except zmq.Again:
                    break
                except zmq.ZMQError as e:
                    if e.errno != zmq.EHOSTUNREACH:
                        raise
                    self._gone(ident)
                    break
                waiting.popleft()
            if not waiting:
                self.outboxes.pop(ident, None)

    def _tell(self, *message) -> None:
        """What the other ranks of a split target must do as well (remote/tp_follower.py)."""
        if self.mirror is not None:
            self.mirror(message)

    def _gone(self, ident: bytes) -> None:
        self._tell("gone", ident)
        self.outboxes.pop(ident, None)
        if ident == self.owner:
            self._owner_gone()

    def _owner_gone(self) -> None:
        """The session stays, for its client to resume (a dropped tunnel), until another
        client starts one."""
        done = self.run_state["count"] if self.run_state else 0
        during = f" during a run ({done} rounds sent)" if self.run_state else ""
        kept = ""
        if self.host.session is not None:
            kept = f"; its session ({len(self.sent)} rounds) is kept to resume"
        self.log(f"the client went away{during}{kept}")
        self.outboxes.pop(self.owner, None)
        self.owner, self.run_state = None, None

    def _release(self) -> None:
        """The session ends (closed, or replaced by another client's)."""
        self.host.close()
        self._forget()

    def _forget(self) -> None:
        """The connection's state of a session that is gone."""
        self.outboxes.pop(self.owner, None)
        self.owner, self.run_state = None, None
        self.sent = []

    def _owner_alive(self) -> bool:
        """Ping the owner: ZeroMQ forgets a peer whose connection closed or whose
        heartbeats stopped, and then the send fails."""
        return self._send(self.owner, [P.encode({"type": "ping"})])

    # ------------------------------------------------------------------------------ requests

    def _handle(self, ident: bytes, frames: list[bytes]) -> None:
        waiting = self.outboxes.get(ident)
        if waiting is not None and len(waiting) >= MAX_WAITING:
            self._burst(
                "unread",
                f"dropped a request from a client with {len(waiting)} replies unread "
                "(it sends without reading; its requests are taken again once it reads)",
            )
            return
        re = None
        try:
            request = P.decode_request(frames)
            re = request.get("id")
            if not P.token_matches(request.get("token"), self.token):
                self._burst("token", "refused a request with a wrong token")
                reply = P.error(
                    "bad_token", "wrong token: give the token `specviz serve` printed", re
                )
                self._send(ident, [P.encode(reply)])
                return
            op = request["op"]
            busy = op not in ("hello", "resume") and self.owner not in (None, ident)
            if busy and self._owner_alive():
                self.log(f"refused a second client's {op!r}: another client drives the session")
                reply = P.error(
                    "busy",
                    "another client is driving this server's session; one client at a time "
                    "(it must close its session or disconnect first)",
                    re,
                )
                self._send(ident, [P.encode(reply)])
                return
            self._tell("op", op, ident, request, re)
            frames_out = getattr(self, f"_op_{op}")(ident, request, re)
        except P.BadMessage as e:
            self.log(f"refused a malformed request: {e}")
            frames_out = [P.encode(P.error("bad_request", str(e), re))]
        except HostError as e:  # no session, finished, cannot continue
            frames_out = [P.encode(P.error(e.code, str(e), re))]
        except ValueError as e:  # bad settings, prompt or context
            frames_out = [P.encode(P.error("bad_value", f"{e}", re))]
        except Exception as e:  # from torch / transformers: the server survives it
            self.log(f"a request failed: {type(e).__name__}: {e}")
            frames_out = [P.encode(P.error("failed", f"{type(e).__name__}: {e}", re))]
        if frames_out:
            self._send(ident, frames_out)

    def _ok(self, re: int | None, **fields: Any) -> list[bytes]:
        return [P.encode({"type": "ok", "re": re, **fields})]

    def _op_hello(self, ident: bytes, request: dict, re: int | None) -> list[bytes]:
        pair = self.pair
        return [
            P.encode(
                {
                    "type": "hello",
                    "re": re,
                    "protocol": P.PROTOCOL,
                    "specviz": __version__,
                    "target_spec": self.specs[0],
                    "draft_spec": self.specs[1],
                    "target": dataclasses.asdict(pair.target_info),
                    "draft": dataclasses.asdict(pair.draft_info) if pair.draft_info else None,
                    **P.drafting_to_json(*self.host.drafting),
                    "device": str(pair.device),
                    "vocab_size": pair.vocab_size,
                    "instruct": pair_instruct_reason(pair),  # why chat is on by default, or None
                    "busy": self.owner not in (None, ident),
                }
            )
        ]

    def _op_start(self, ident: bytes, request: dict, re: int | None) -> list[bytes]:
        prompt = request.get("prompt")
        if not isinstance(prompt, str):
            raise P.BadMessage("'prompt' must be a string")
        settings = P.settings_from_json(request.get("settings", {}))
        flags = [request.get(name, True) for name in ("calibrate", "trace")]
        chat = request.get("chat")  # absent or null: the server's default
        if any(type(flag) is not bool for flag in flags) or type(chat) not in (bool, type(None)):
            raise P.BadMessage("'calibrate', 'trace' and 'chat' must be true or false")
        calibrate, trace = flags
        drafting = P.drafting_from_json(request, self.host.drafting)
        before = self.host.session
        try:
            header = self.host.start(prompt, settings, calibrate, trace, chat, drafting)
        finally:
            if self.host.session is not before:  # the old session is gone, even on a failure
                self._forget()
        self.owner = ident
        self.log(f"session {header.session_id} started ({len(header.prompt_ids)} prompt tokens)")
        return [P.header_message(header, re)]

    def _check_session(self, re: int | None) -> list[bytes] | None:
        """A refusal of a round while a run is in progress; the host's own refusals (no
        session, finished) are raised by host.ready."""
        if self.run_state is not None:
            return [P.encode(P.error("running", "a run is in progress: pause it first", re))]
        self.host.ready()
        return None

    def _op_step(self, ident: bytes, request: dict, re: int | None) -> list[bytes]:
        refused = self._check_session(re)
        if refused:
            return refused
        try:
            rnd = self.host.step()
        except Exception:
            self._forget()  # the host dropped the session: its caches may be half-updated
            raise
        self.sent.append(P.round_message(rnd))
        return [self.sent[-1]]

    def _op_run(self, ident: bytes, request: dict, re: int | None) -> list[bytes]:
        limit = request.get("max_rounds")
        if limit is not None and (type(limit) is not int or limit < 1):
            raise P.BadMessage("'max_rounds' must be a positive integer or null")
        refused = self._check_session(re)
        if refused:
            return refused
        self.run_state = {"re": re, "max": limit, "count": 0}
        return []

    def _run_one(self) -> None:
        self._tell("run_one")
        state = self.run_state
        try:
            rnd = self.host.step()
        except Exception as e:  # the host dropped the session
            self.log(f"a round failed: {type(e).__name__}: {e}")
            self.run_state, self.sent = None, []
            self._stopped(state, "error", f"{type(e).__name__}: {e}")
            return
        state["count"] += 1
        self.sent.append(P.round_message(rnd))
        if not self._send(self.owner, [self.sent[-1]]):
            return
        if self.host.finished:
            self._stopped(state, "finished")
        elif state["max"] is not None and state["count"] >= state["max"]:
            self._stopped(state, "max_rounds")

    def _stopped(self, state: dict, reason: str, message: str = "") -> None:
        self.run_state = None
        stopped = {"type": "stopped", "re": state["re"], "reason": reason, "rounds": state["count"]}
        if message:
            stopped["message"] = message
        self._send(self.owner, [P.encode(stopped)])

    def _op_pause(self, ident: bytes, request: dict, re: int | None) -> list[bytes]:
        if self.run_state is not None:
            self._stopped(self.run_state, "paused")
        return self._ok(re)

    def _op_settings(self, ident: bytes, request: dict, re: int | None) -> list[bytes]:
        self.host.update_settings(P.settings_from_json(request.get("settings")))
        return self._ok(re)

    def _op_continue(self, ident: bytes, request: dict, re: int | None) -> list[bytes]:
        """Go on after max new tokens or end-of-text, with new settings (the window's Continue)."""
        self.host.continue_session(P.settings_from_json(request.get("settings", {})))
        return self._ok(re)

    def _op_remeasure(self, ident: bytes, request: dict, re: int | None) -> list[bytes]:
        """A full cost-model probe after the next round (the Tune panel's Re-measure)."""
        self.host.remeasure()
        return self._ok(re)

    def _op_resume(self, ident: bytes, request: dict, re: int | None) -> list[bytes]:
        """Take the session over again after a dropped connection (any client with the token
        and its session id): the reply carries the rounds made after the `received` first."""
        session_id, received = request.get("session_id"), request.get("received")
        if type(session_id) is not str or type(received) is not int or received < 0:
            raise P.BadMessage("'session_id' must be a string, 'received' an integer >= 0")
        header = self.host.header
        if header is None or header.session_id != session_id:
            why = "its session has ended (the server restarted, or a client started another)"
            return [P.encode(P.error("no_session", why, re))]
        if received > len(self.sent):
            raise ValueError(f"the session has {len(self.sent)} rounds, not {received}")
        if self.owner not in (None, ident):
            self.outboxes.pop(self.owner, None)  # the old connection, not yet noticed as gone
        self.owner, self.run_state = ident, None
        missed = self.sent[received:]
        self.log(f"session {session_id} resumed ({len(missed)} rounds the client missed)")
        reply = {
            "type": "resumed",
            "re": re,
            "finished": self.host.finished,
            "rounds": [orjson.Fragment(m) for m in missed],
        }
        return [orjson.dumps(reply)]

    def _op_close(self, ident: bytes, request: dict, re: int | None) -> list[bytes]:
        if self.owner == ident:
            self.log("the client closed its session")
            self._release()
        return self._ok(re)
