"""The engine elsewhere: a worker with local_engine.py's signals that drives a RemoteEngine,
either `specviz serve` on another machine (`--connect`) or one in a child process
(`--engine process`), on its own QThread so that the window never waits on the network.

Every wait of the client polls in 0.1 s slices and checks the stop event, so shutdown()
returns within moments even while a request is in flight. A lost connection keeps every
round already emitted (they live in the window's session) and is reported by `error` and
`disconnected`; the next load (re)connects.
"""

from __future__ import annotations

import collections
import json
import threading
import time

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot

from specviz.core.trace.records import Settings
from specviz.gui.session.local_engine import EngineSignals, Loaded
from specviz.remote.client import Cancelled, RemoteEngine
from specviz.remote.protocol import ConnectionLost, RemoteError, model_info
from specviz.remote.spawn import ChildServer, engine_threads

WATCH_MS = 1000  # how often an idle worker checks its connection (no network wait)
# While running, rounds that arrive within one frame go to the window as one list, drawn once:
# the window then redraws at most 1 / FRAME_S times a second however fast the engine is, and
# leaves the rest of its core to the engine. Rounds slower than this are handed on at once.
FRAME_S = 0.05


def child_args(options) -> list[str]:
    """`specviz serve` arguments for a core.models.pair.LoadOptions beyond device and dtype."""
    if options is None:
        return []
    device_map = options.device_map
    args = [] if device_map is None else ["--device-map", json.dumps(device_map).strip('"')]
    for flag, value in (
        ("--draft-device", options.draft_device),
        ("--attn-implementation", options.attn_implementation),
        ("--revision", options.revision),
        ("--draft-revision", options.draft_revision),
    ):
        if value:
            args += [flag, value]
    return args + (["--trust-remote-code"] if options.trust_remote_code else [])


class RemoteWorker(QObject):
    """Runs on its QThread; every slot runs there, every signal is emitted there.

    address/token: a server to connect to; with address None, load() starts a child
    `specviz serve` on the pair it is asked for."""

    loaded = Signal(object)  # Loaded
    session_started = Signal(object)  # SessionHeader
    round_ready = Signal(object)  # Round
    rounds_ready = Signal(object)  # list[Round], in order: a frame's worth while running
    position_ready = Signal(object)  # core.lab.position.PositionDistributions
    greedy_checked = Signal(object)  # (n_tokens, core.decoding.greedy_check.GreedyDiff | None)
    error = Signal(str, str)  # title, message
    busy = Signal(str)
    disconnected = Signal(str)  # why; the rounds received stay in the window's session
    resumed = Signal(object)  # after set_resume's load: the rounds missed, or None (ended)

    def __init__(self, address: str | None = None, token: str | None = None):
        super().__init__()  # no parent: a parented QObject cannot move to a thread
        self.address, self.token = address, token
        self.stop_event = threading.Event()
        self.remote: RemoteEngine | None = None
        self._watch: QTimer | None = None  # while idle, notices a server gone (its thread)
        # Run: the server makes rounds ahead (its queue holds a few) and each step takes the
        # next, so the engine never waits for the window to draw and ask.
        self._running = False
        self._stream = None  # RemoteEngine.run() while running
        self._buffer: collections.deque = collections.deque()  # rounds made before a pause
        self._frame_end = 0.0  # time.monotonic() before which a running window gets no rounds
        self.frame_s = FRAME_S
        self.child_threads: int | None = None  # a child engine's torch threads: engine_threads()
        self.child: ChildServer | None = None
        self.calibrate = True
        self.load_options = None  # core.models.pair.LoadOptions for a child engine's load
        self.drafting: tuple | None = None  # (DrafterConfig, PolicyConfig); None: the server's
        self.chat = False  # the next session's prompt as a chat turn
        self._resume: tuple | None = None  # (SessionHeader, rounds received) for the next load

    @Slot(object)
    def set_load_options(self, options) -> None:
        """The loading options of the next child engine (device and dtype come with load)."""
        self.load_options = options

    @Slot(object, int)
    def set_resume(self, header, received: int) -> None:
        """The next load (a reconnect) resumes the server's session `header`, of which the
        window has `received` rounds."""
        self._resume = (header, received)

    @Slot(object, object)
    def set_drafting(self, drafter, policy) -> None:
        """The drafter and K policy of the next session."""
        self.drafting = (drafter, policy)

    @Slot(object)
    def set_chat(self, chat: bool) -> None:
        """Whether the next session's prompt is a user turn of the chat template."""
        self.chat = bool(chat)

    @Slot(object, object)
    def check_greedy(self, prompt_ids: list, emitted: list) -> None:
        """The engine's target decodes the prompt greedily, where the models are."""
        answered, diff = self._ask(
            f"decoding {len(emitted)} tokens greedily with the target alone",
            "Could not run the greedy check",
            lambda: self.remote.greedy_check(list(prompt_ids), list(emitted)),
        )
        if answered:
            self.greedy_checked.emit((len(emitted), diff))

    def _ask(self, doing: str, failed: str, request) -> tuple[bool, object]:
        """One question to the engine between rounds (the lab's position, the greedy check),
        saying what is being done meanwhile: (True, its answer), or (False, None) once the
        failure is reported."""
        if not self._ready():
            return False, None
        self.busy.emit(doing)
        try:
            return True, request()
        except RemoteError as e:
            self._failed(failed, e)
            return False, None
        finally:
            self.busy.emit("")

    def _failed(self, title: str, e: Exception) -> None:
        if isinstance(e, Cancelled):
            return
        if isinstance(e, ConnectionLost):
            self._drop()
            self.disconnected.emit(str(e))
            self.error.emit(
                title,
                f"{e}.\n\nThe rounds received so far are kept (you can export them). "
                "Press Reconnect (Session menu, or the banner in the stream) to connect "
                "again.",
            )
        else:
            self.error.emit(title, f"{e}.")

    @Slot(bool)
    def set_running(self, running: bool) -> None:
        """The window runs (each step takes the next streamed round) or stopped running."""
        self._running = running
        if not running and self._stream is not None:
            try:
                self._stop_stream()
            except RemoteError as e:
                self._failed("Could not pause", e)

    def _stop_stream(self) -> None:
        """Pause the server's run; the rounds it made meanwhile wait for the next steps."""
        self._stream = None
        self._buffer.extend(self.remote.pause())

    def _drop(self) -> None:
        for rnd in self._buffer:  # received: the window keeps them
            self.round_ready.emit(rnd)
        self._buffer.clear()
        self._stream = None
        if self._watch is not None:
            self._watch.stop()
        if self.remote is not None:
            self.remote.close(timeout=0.5)
            self.remote = None

    @Slot(str, str, str, str)
    def load(self, target: str, draft: str, device: str, dtype: str) -> None:
        """Connect (or start the child engine on this pair) and say hello."""
        if self.stop_event.is_set():
            return
        self.close()
        cancel = self.stop_event.is_set
        try:
            address, token = self.address, self.token
            if address is None:
                self.busy.emit(f"starting an engine process for {target} + {draft}")
                extra = ("--device", device, "--dtype", dtype, *child_args(self.load_options))
                extra += ("--threads", str(self.child_threads or engine_threads()))
                self.child = ChildServer(target, draft, extra, cancel=cancel)
                address, token = self.child.address, self.child.token
            self.busy.emit(f"connecting to {address}")
            self.remote = RemoteEngine(address, token or "", cancel=cancel)
        except (RemoteError, ValueError) as e:
            self.close()
            self._failed("Could not connect to the engine", e)
            return
        finally:
            self.busy.emit("")
        if self._watch is None:
            self._watch = QTimer(self)  # created here: it belongs to the worker's thread
            self._watch.setInterval(WATCH_MS)
            self._watch.timeout.connect(self._check_idle)
        self._watch.start()
        resume, self._resume = self._resume, None
        missed = None
        if resume is not None:
            try:
                missed = self.remote.resume(*resume)
            except ConnectionLost as e:
                self._failed("Could not connect to the engine", e)
                return
            except RemoteError:
                pass  # the server's session has ended: the next Step starts a new one
        info = self.remote.info
        self.loaded.emit(
            Loaded(
                info.get("target_spec") or target,
                info.get("draft_spec") or draft,
                model_info(info["target"]),
                model_info(info["draft"] or {**info["target"], "name": "(no draft model)"}),
                str(info["device"]),
                int(info["vocab_size"]),
                info.get("instruct") if isinstance(info.get("instruct"), str) else None,
            )
        )
        if resume is not None:
            self.resumed.emit(missed)

    def _check_idle(self) -> None:
        """The worker is idle (a timer slot runs between requests): has the server gone?"""
        if self.remote is None or self.stop_event.is_set() or self._stream is not None:
            return  # (a run's rounds wait in the socket: its next step notices a loss)
        try:
            self.remote.check_connection()
        except RemoteError as e:
            self._failed("The connection to the engine was lost", e)

    def _ready(self) -> bool:
        if self.stop_event.is_set():
            return False
        if self.remote is None:
            self.error.emit("Not connected", "Load the models (this connects to the engine).")
            return False
        return True

    @Slot(str, object)
    def start_session(self, prompt: str, settings: Settings) -> None:
        if not self._ready():
            return
        self.busy.emit("reading the prompt and measuring the models' step times")
        try:
            if self._stream is not None:
                self._stop_stream()
            self._buffer.clear()
            header = self.remote.start(
                prompt, settings, self.calibrate, chat=self.chat, drafting=self.drafting
            )
        except RemoteError as e:
            self._failed("Could not start the session", e)
            return
        finally:
            self.busy.emit("")
        self.session_started.emit(header)

    @Slot()
    def step(self) -> None:
        """The next round; while running, every round streamed within the frame (one list)."""
        if self._buffer and not self.stop_event.is_set():
            self.round_ready.emit(self._buffer.popleft())
            return
        if not self._ready() or self.remote.header is None or self.remote.finished:
            return
        batch = []
        try:
            if self._running and self._stream is None:
                self._stream = self.remote.run()
            if self._stream is not None:
                self._next_frame(batch)
            if not batch:  # not running, or the run ended
                self._stream = None
                self.round_ready.emit(self.remote.step())
        except RemoteError as e:
            if batch:  # received before the fault: the window keeps them
                self.rounds_ready.emit(batch)
            self._failed("A round failed", e)
            return
        if batch:
            self._frame_end = time.monotonic() + self.frame_s
            self.rounds_ready.emit(batch)

    def _next_frame(self, batch: list) -> None:
        """Wait for the stream's next round, then add to `batch` those that arrive before
        the frame ends; an empty batch: the run ended."""
        while True:
            rnd = next(self._stream, None)
            if rnd is None:
                self._stream = None
                return
            batch.append(rnd)
            if rnd.finish_reason is not None or self.stop_event.is_set():
                return
            wait = self._frame_end - time.monotonic()
            if wait <= 0 or not self.remote.wait_message(wait):
                return

    @Slot(object)
    def update_settings(self, settings: Settings) -> None:
        if self.stop_event.is_set() or self.remote is None or self.remote.header is None:
            return
        try:
            self.remote.update_settings(settings)
        except RemoteError as e:
            self._failed("Setting not applied", e)

    @Slot(object)
    def continue_session(self, settings: Settings) -> None:
        """Go on after max new tokens or end-of-text, with the new settings."""
        if self.stop_event.is_set() or self.remote is None or not self.remote.finished:
            return
        try:
            self.remote.continue_session(settings)
        except RemoteError as e:
            self._failed("Could not continue", e)

    @Slot()
    def remeasure(self) -> None:
        """A full cost-model probe after the next round (the Tune panel's Re-measure)."""
        if self.stop_event.is_set() or self.remote is None or self.remote.header is None:
            return
        try:
            self.remote.remeasure()
        except RemoteError as e:
            self._failed("Could not re-measure", e)

    @Slot(object, object)
    def compute_position(self, context_ids: list, settings: Settings) -> None:
        answered, result = self._ask(
            "computing p and q at the position",
            "Could not compute the position",
            lambda: self.remote.position(list(context_ids), settings),
        )
        if answered:
            self.position_ready.emit(result)

    def close(self) -> None:
        """Close the connection and stop the child engine (on the worker's thread)."""
        self._drop()
        if self.child is not None:
            self.child.stop()
            self.child = None


class RemoteEngineThread(EngineSignals):
    """gui/session/local_engine.py's EngineThread for a RemoteWorker: the same request_* signals and
    relayed signals, plus
    request_running, request_resume, `rounds_ready`, `disconnected` and `resumed`. Lives on
    the GUI thread."""

    request_running = Signal(bool)
    request_resume = Signal(object, int)  # SessionHeader, rounds received: the next load
    rounds_ready = Signal(object)  # list[Round]: a frame's worth of a run
    disconnected = Signal(str)
    resumed = Signal(object)  # list[Round] the connection missed, or None: the session ended

    def __init__(
        self, address: str | None = None, token: str | None = None, parent: QObject | None = None
    ):
        super().__init__(parent)
        self.address = address  # a `specviz serve` elsewhere; None: a child engine process
        self._attach(RemoteWorker(address, token), "specviz-remote-engine")
        self.request_running.connect(self.worker.set_running)
        self.worker.rounds_ready.connect(self.rounds_ready)
        self.request_resume.connect(self.worker.set_resume)
        self.worker.resumed.connect(self.resumed)
        self.worker.disconnected.connect(self.disconnected)
        # The socket belongs to the worker's thread: close it there, as the thread ends.
        self.thread.finished.connect(self.worker.close, Qt.ConnectionType.DirectConnection)
        self.thread.start()

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Cancel the request in flight (within 0.1 s), close, end the thread, join it."""
        return super().shutdown(timeout_ms)
