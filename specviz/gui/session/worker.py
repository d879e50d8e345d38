"""The engine on its own thread: one EngineWorker QObject, moved to one QThread, driving any
core.engine.protocol.Engine through a link: gui.session.local_link (the pair in this process,
core.host.session_host.SessionHost) or gui.session.remote_link (`specviz serve` elsewhere, or the
window's child process, remote.client.RemoteEngine).

Only the worker's thread touches the engine. The GUI talks to it through queued signals
(`EngineThread.request_*`) and gets frozen core records back. Every exception becomes
`error(title, message)`; the session on the GUI side is never lost. Stopping is cooperative:
a threading.Event checked before each slot's work (a model load checks it between steps, a
remote wait every 0.1 s), and the job in progress (a Tune sweep) is cancelled.
"""

from __future__ import annotations

import collections
import threading
import time

from PySide6.QtCore import QObject, Qt, QThread, QTimer, Signal, Slot

from specviz.core.decoding.k_policy import PolicyConfig
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.models.load_options import LoadOptions
from specviz.core.trace.records import Settings
from specviz.gui.session.loaded import Cancelled

WATCH_MS = 1000  # how often an idle worker checks a connection (no network wait)
# While running on an engine elsewhere, rounds that arrive within one frame go to the window
# as one list, drawn once: the window redraws at most 1 / FRAME_S times a second however fast
# the engine is. Rounds slower than this are handed on at once.
FRAME_S = 0.05


STEP_HINT = (
    "The rounds so far are kept (you can export them). Press Step to start a new session "
    "with the same prompt."
)


class EngineWorker(QObject):
    """Runs on its QThread; every slot runs there, every signal is emitted there."""

    loaded = Signal(object)  # Loaded
    session_started = Signal(object)  # SessionHeader
    round_ready = Signal(object)  # Round
    rounds_ready = Signal(object)  # list[Round], in order: a frame's worth of a streamed run
    position_ready = Signal(object)  # core.lab.position.PositionDistributions
    greedy_checked = Signal(object)  # (n_tokens, core.decoding.greedy_check.GreedyDiff | None)
    error = Signal(str, str)  # title (what failed), message (why and what to do)
    busy = Signal(str)  # what the worker is doing; "" when idle
    disconnected = Signal(str)  # why; the rounds received stay in the window's session
    resumed = Signal(object)  # after a resuming load: the rounds missed, or None (ended)

    def __init__(self, link):
        super().__init__()  # no parent: a parented QObject cannot move to a thread
        self.link = link
        self.stop_event = threading.Event()
        self.calibrate = True
        self.load_options = LoadOptions()  # beyond device and dtype (the command line's)
        self.drafting: tuple = (DrafterConfig(), PolicyConfig())  # the next session's
        self.chat = False  # the next session's prompt as a chat turn
        self._job = None  # the job in progress (a Tune sweep), cancelled on shutdown
        self._watch: QTimer | None = None  # while idle, notices a server gone (its thread)
        # Run on a streaming link: the engine makes rounds ahead and each step takes the
        # next, so the engine never waits for the window to draw and ask.
        self._running = False
        self._stream = None  # Engine.run() while running
        self._buffer: collections.deque = collections.deque()  # rounds made before a pause
        self._frame_end = 0.0  # time.monotonic() before which a running window gets no rounds
        self.frame_s = FRAME_S

    # ------------------------------------------------------------------ next session's

    @Slot(object)
    def set_load_options(self, options: LoadOptions) -> None:
        """The loading options of the next loads (device and dtype come with each load)."""
        self.load_options = options

    @Slot(object, object)
    def set_drafting(self, drafter, policy) -> None:
        """The drafter and K policy of the next session."""
        self.drafting = self.link.drafting = (drafter, policy)

    @Slot(object)
    def set_chat(self, chat: bool) -> None:
        """Whether the next session's prompt is a user turn of the chat template."""
        self.chat = bool(chat)

    @Slot(object, int)
    def set_resume(self, header, received: int) -> None:
        """The next load (a reconnect) resumes the engine's session `header`, of which the
        window has `received` rounds."""
        self.link.resume_next = (header, received)

    @Slot(bool)
    def set_running(self, running: bool) -> None:
        """The window runs (each step takes the next streamed round) or stopped running."""
        self._running = running
        if not running and self._stream is not None:
            try:
                self._stop_stream()
            except Exception as e:
                self.fail("Could not pause", e)

    # ------------------------------------------------------------------ failures

    def progress(self, message: str) -> None:
        """A model load's progress: said, and a closing window cancels it."""
        if self.stop_event.is_set():
            raise Cancelled()
        self.busy.emit(message)

    def fail(self, title: str, e: Exception, hint: str = "") -> None:
        """Report `e` (a cancel is not reported; a lost connection drops it, said so)."""
        link = self.link
        if isinstance(e, (Cancelled, *link.CANCELLED)):
            return
        if isinstance(e, link.LOST):
            self._drop()
            self.disconnected.emit(str(e))
            self.error.emit(
                title,
                f"{e}.\n\nThe rounds received so far are kept (you can export them). "
                "Press Reconnect (Session menu, or the banner in the stream) to connect "
                "again.",
            )
        elif isinstance(e, link.PLAIN):
            self.error.emit(title, f"{e}.")
        else:
            self.error.emit(title, f"{type(e).__name__}: {e}" + (f"\n\n{hint}" if hint else "."))

    def _ready(self) -> bool:
        if self.stop_event.is_set():
            return False
        if self.link.engine is None:
            self.error.emit(*self.link.not_ready)
            return False
        return True

    def _ask(self, doing: str, failed: str, request) -> tuple[bool, object]:
        """One question to the engine between rounds (the lab's position, the greedy check),
        saying what is being done meanwhile: (True, its answer), or (False, None) once the
        failure is reported."""
        if not self._ready():
            return False, None
        self.busy.emit(doing)
        try:
            return True, request()
        except Exception as e:
            self.fail(failed, e)
            return False, None
        finally:
            self.busy.emit("")

    # ------------------------------------------------------------------ the engine

    @Slot(str, str, str, str)
    def load(self, target: str, draft: str, device: str, dtype: str) -> None:
        """Load a pair, or connect to the engine (or start the child engine on this pair):
        the current session ends; draft "": the target alone."""
        if self.stop_event.is_set():
            return
        self._drop()  # the rounds made ahead are handed on; a connection closes
        opened = self.link.open(target, draft, device, dtype, self)
        if opened is None:
            return  # reported
        info, resuming, missed = opened
        if self.link.watches:
            if self._watch is None:
                self._watch = QTimer(self)  # created here: it belongs to the worker's thread
                self._watch.setInterval(WATCH_MS)
                self._watch.timeout.connect(self._check_idle)
            self._watch.start()
        self.loaded.emit(info)
        if resuming:
            self.resumed.emit(missed)

    def _check_idle(self) -> None:
        """The worker is idle (a timer slot runs between requests): has the server gone?"""
        engine = self.link.engine
        if engine is None or self.stop_event.is_set() or self._stream is not None:
            return  # (a run's rounds wait in the socket: its next step notices a loss)
        try:
            engine.check_connection()
        except Exception as e:
            self.fail("The connection to the engine was lost", e)

    @Slot(str, object)
    def start_session(self, prompt: str, settings: Settings) -> None:
        """Encode the prompt, fill both caches, measure the step costs: a new session."""
        if not self._ready():
            return
        refusal = self.link.refusal(self.drafting)
        if refusal is not None:
            self.error.emit(*refusal)
            return
        self.busy.emit("reading the prompt and measuring the models' step times")
        try:
            self._drop_stream()
            header = self.link.engine.start(
                prompt, settings, self.calibrate, chat=self.chat, drafting=self.drafting
            )
        except Exception as e:
            self.fail(
                "Could not start the session", e, "Try a shorter prompt or reload the models."
            )
            return
        finally:
            self.busy.emit("")
        self.session_started.emit(header)

    @Slot()
    def step(self) -> None:
        """The next round: round_ready(Round), or while streaming every round made within
        the frame (rounds_ready, one list); or error, and the session stays as it was."""
        if self._buffer and not self.stop_event.is_set():
            self.round_ready.emit(self._buffer.popleft())
            return
        engine = self.link.engine  # none (or no session yet): nothing to step, no error
        if self.stop_event.is_set() or engine is None or engine.header is None or engine.finished:
            return
        batch = []
        try:
            if self.link.streams and self._running and self._stream is None:
                self._stream = engine.run()
            if self._stream is not None:
                self._next_frame(batch)
            if not batch:  # not running, or the run ended
                self._stream = None
                self.round_ready.emit(engine.step())
        except Exception as e:
            if batch:  # received before the fault: the window keeps them
                self.rounds_ready.emit(batch)
            self.link.drop_session()  # its caches may be half-updated
            self.fail("A round failed", e, STEP_HINT)
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
            if wait <= 0 or not self.link.engine.wait_message(wait):
                return

    def _stop_stream(self) -> None:
        """Pause the engine's run; the rounds it made meanwhile wait for the next steps."""
        self._stream = None
        self._buffer.extend(self.link.engine.pause())

    def _drop_stream(self) -> None:
        if self._stream is not None:
            self._stop_stream()
        self._buffer.clear()

    def _session(self) -> bool:
        engine = self.link.engine
        return not self.stop_event.is_set() and engine is not None and engine.header is not None

    @Slot(object)
    def update_settings(self, settings: Settings) -> None:
        """K and sampling for the next round of the running session."""
        if self._session():
            try:
                self.link.engine.update_settings(settings)
            except Exception as e:
                self.fail("Setting not applied", e)

    @Slot(object)
    def continue_session(self, settings: Settings) -> None:
        """Go on after max new tokens or end-of-text, with the new settings."""
        if self._session() and self.link.engine.finished:
            try:
                self.link.engine.continue_session(settings)
            except Exception as e:
                self.fail("Could not continue", e)

    @Slot()
    def remeasure(self) -> None:
        """A full cost-model probe after the next round (the Tune panel's Re-measure)."""
        if self._session():
            try:
                self.link.engine.remeasure()
            except Exception as e:
                self.fail("Could not re-measure", e)

    @Slot(object, object)
    def check_greedy(self, prompt_ids: list, emitted: list) -> None:
        """The target's own greedy decoding of the prompt against the session's tokens."""
        answered, diff = self._ask(
            f"decoding {len(emitted)} tokens greedily with the target alone",
            "Could not run the greedy check",
            lambda: self.link.engine.greedy_check(list(prompt_ids), list(emitted)),
        )
        if answered:
            self.greedy_checked.emit((len(emitted), diff))

    @Slot(object, object)
    def compute_position(self, context_ids: list, settings: Settings) -> None:
        """Full-vocabulary p and q (raw and warped) after context_ids, for the lab."""
        answered, result = self._ask(
            "computing p and q at the position",
            "Could not compute the position",
            lambda: self.link.engine.position(list(context_ids), settings),
        )
        if answered:
            self.position_ready.emit(result)

    @Slot(object)
    def run_job(self, job) -> None:
        """A job on the engine (a Tune sweep: `job(engine)` calls engine.sweep and reports by
        its own signals; `job(None)`, before any engine, says why it cannot run)."""
        if self.stop_event.is_set():
            return
        self._job = job
        try:
            job(self.link.engine)
        finally:
            self._job = None

    def cancel_job(self) -> None:
        """Any thread: cancel the job in progress."""
        job = self._job
        if job is not None:
            job.cancel()

    def _drop(self) -> None:
        for rnd in self._buffer:  # received: the window keeps them
            self.round_ready.emit(rnd)
        self._buffer.clear()
        self._stream = None
        if self._watch is not None:
            self._watch.stop()
        self.link.drop()

    def close(self) -> None:
        """End the engine (on the worker's thread): close a connection, stop a child."""
        self._drop()
        self.link.close()


class EngineThread(QObject):
    """Owns the worker's QThread; lives on the GUI thread. Ask with the request_* signals;
    the worker's signals are re-emitted here, on the GUI thread, so that any callable can
    listen (a plain Python callable connected to the worker itself would run on the
    worker's thread). link: gui.session.local_link.LocalLink() by default."""

    request_load = Signal(str, str, str, str)
    request_load_options = Signal(object)
    request_drafting = Signal(object, object)
    request_chat = Signal(object)
    request_greedy_check = Signal(object, object)
    request_start = Signal(str, object)
    request_step = Signal()
    request_settings = Signal(object)
    request_continue = Signal(object)
    request_remeasure = Signal()
    request_position = Signal(object, object)
    request_running = Signal(bool)
    request_resume = Signal(object, int)  # SessionHeader, rounds received: the next load
    request_job = Signal(object)
    # the worker's signals, relayed to the GUI thread
    loaded = Signal(object)
    session_started = Signal(object)
    round_ready = Signal(object)
    rounds_ready = Signal(object)
    position_ready = Signal(object)
    greedy_checked = Signal(object)
    error = Signal(str, str)
    busy = Signal(str)
    disconnected = Signal(str)
    resumed = Signal(object)

    REQUESTS = {
        "request_load": "load",
        "request_load_options": "set_load_options",
        "request_drafting": "set_drafting",
        "request_chat": "set_chat",
        "request_greedy_check": "check_greedy",
        "request_start": "start_session",
        "request_step": "step",
        "request_settings": "update_settings",
        "request_continue": "continue_session",
        "request_remeasure": "remeasure",
        "request_position": "compute_position",
        "request_running": "set_running",
        "request_resume": "set_resume",
        "request_job": "run_job",
    }
    RELAYED = ("loaded", "session_started", "round_ready", "rounds_ready", "position_ready",
               "greedy_checked", "error", "busy", "disconnected", "resumed")  # fmt: skip

    def __init__(self, link=None, parent: QObject | None = None):
        super().__init__(parent)
        if link is None:
            from specviz.gui.session.local_link import LocalLink

            link = LocalLink()
        self.link = link
        self.address = link.address  # a `specviz serve` elsewhere, or None
        self.worker = EngineWorker(link)
        self.thread = QThread()
        self.thread.setObjectName(link.THREAD_NAME)
        self.worker.moveToThread(self.thread)
        for request, slot in self.REQUESTS.items():
            getattr(self, request).connect(getattr(self.worker, slot))
        for signal in self.RELAYED:  # a queued connection: a thread hop
            getattr(self.worker, signal).connect(getattr(self, signal))
        # A socket belongs to the worker's thread: close it there, as the thread ends.
        self.thread.finished.connect(self.worker.close, Qt.ConnectionType.DirectConnection)
        self.thread.start()

    def shutdown(self, timeout_ms: int | None = None) -> bool:
        """Stop after the current round, request or job, end the thread and join it."""
        if not self.thread.isRunning():
            return True
        self.worker.stop_event.set()
        self.worker.cancel_job()
        self.thread.quit()
        return self.thread.wait(timeout_ms or self.link.SHUTDOWN_MS)
