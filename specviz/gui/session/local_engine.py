"""The engine on its own thread: one long-lived Worker QObject, moved to one QThread.

The worker owns the ModelPair, the SpeculativeEngine and its RNG; only its thread touches
them. The GUI talks to it through queued signals (`EngineThread.request_*`) and gets
frozen core records back. Every exception becomes `error(title, message)`; the session on
the GUI side is never lost. Stopping is cooperative: a threading.Event checked before each
slot's work, and between the steps of a model load.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass

from PySide6.QtCore import QObject, QThread, Signal, Slot

from specviz.core.decoding.k_policy import PolicyConfig
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.models.chat import pair_instruct_reason, session_prompt
from specviz.core.models.pair import LoadOptions, ModelLoadError, ModelPair
from specviz.core.models.spec import PairSpec
from specviz.core.trace.records import ModelInfo, Settings


@dataclass(frozen=True)
class Loaded:
    """What `loaded` carries: the pair as asked for and as loaded (draft_spec "" and draft
    None: the target alone, for a drafter that needs no draft model)."""

    target_spec: str
    draft_spec: str
    target: ModelInfo
    draft: ModelInfo | None
    device: str
    vocab_size: int
    instruct: str | None = None  # why the target chats by default (core.models.chat), or None


class Cancelled(Exception):
    """Raised inside a model load when the window is closing."""


class Worker(QObject):
    """Runs on its QThread; every slot below runs there, every signal is emitted there."""

    loaded = Signal(object)  # Loaded
    session_started = Signal(object)  # SessionHeader
    round_ready = Signal(object)  # Round
    position_ready = Signal(object)  # core.lab.position.PositionDistributions
    greedy_checked = Signal(object)  # (n_tokens, core.decoding.greedy_check.GreedyDiff | None)
    error = Signal(str, str)  # title (what failed), message (why and what to do)
    busy = Signal(str)  # what the worker is doing; "" when idle

    def __init__(self):
        super().__init__()  # no parent: a parented QObject cannot move to a thread
        self.stop_event = threading.Event()
        self.pair: ModelPair | None = None
        self.engine = None  # SpeculativeEngine of the current session
        self.calibrate = True
        self.load_options = LoadOptions()  # beyond device and dtype (the command line's)
        self.drafter = DrafterConfig()  # what the next session drafts with
        self.policy = PolicyConfig()
        self.chat = False  # the next session's prompt as a chat turn

    @Slot(object)
    def set_load_options(self, options: LoadOptions) -> None:
        """The loading options of the next loads (device and dtype come with each load)."""
        self.load_options = options

    @Slot(object, object)
    def set_drafting(self, drafter: DrafterConfig, policy: PolicyConfig) -> None:
        """The drafter and K policy of the next session."""
        self.drafter, self.policy = drafter, policy

    @Slot(object)
    def set_chat(self, chat: bool) -> None:
        """Whether the next session's prompt is a user turn of the chat template."""
        self.chat = bool(chat)

    def _progress(self, message: str) -> None:
        if self.stop_event.is_set():
            raise Cancelled()
        self.busy.emit(message)

    @Slot(str, str, str, str)
    def load(self, target: str, draft: str, device: str, dtype: str) -> None:
        """Load a pair (replacing the current one and its session); draft "": the target
        alone (a drafter without a draft model)."""
        if self.stop_event.is_set():
            return
        self.busy.emit(f"loading {target} + {draft}" if draft else f"loading {target}")
        options = dataclasses.replace(self.load_options, device=device, dtype=dtype)
        try:
            pair = PairSpec(target, draft or None, options).load(self._progress)
        except Cancelled:
            return
        except ModelLoadError as e:
            self.error.emit(
                "Could not load the models",
                f"{e}\n\nPick another pair in the Models box (or a folder / hub id) and "
                "press Load. A saved trace can still be opened without models (File > Open).",
            )
            return
        except Exception as e:  # anything from transformers / torch
            self.error.emit(
                "Could not load the models",
                f"{type(e).__name__}: {e}\n\nCheck that the target and the draft are causal "
                "language models with the same tokenizer, then press Load again.",
            )
            return
        finally:
            self.busy.emit("")
        self.pair, self.engine = pair, None
        self.loaded.emit(
            Loaded(
                target,
                draft if pair.draft is not None else "",
                pair.target_info,
                pair.draft_info,
                str(pair.device),
                pair.vocab_size,
                pair_instruct_reason(pair),
            )
        )

    @Slot(str, object)
    def start_session(self, prompt: str, settings: Settings) -> None:
        """Encode the prompt, fill both caches, measure the step costs: a new session."""
        if self.stop_event.is_set():
            return
        if self.pair is None:
            self.error.emit(
                "No models loaded",
                "Load a model pair first (Models box, Load), or open a trace.",
            )
            return
        if self.drafter.needs_draft_model and self.pair.draft is None:
            self.error.emit(
                "No draft model loaded",
                "The models were loaded for a drafter without a draft model. Press Load "
                "models to load the draft as well, or choose prompt lookup or early exit in "
                "the Drafting box.",
            )
            return
        from specviz.core.engine.speculative import SpeculativeEngine

        self.busy.emit("reading the prompt and measuring the models' step times")
        try:
            prompt, chat = session_prompt(self.pair, prompt, self.chat)
            engine = SpeculativeEngine(
                self.pair, settings, drafter=self.drafter, policy=self.policy
            )
            header = engine.prefill(prompt, calibrate=self.calibrate)
            if chat is not None:
                header = engine.header = dataclasses.replace(header, chat=chat)
        except ValueError as e:
            self.error.emit("Could not start the session", f"{e}.")
            return
        except Exception as e:
            self.error.emit(
                "Could not start the session",
                f"{type(e).__name__}: {e}\n\nTry a shorter prompt or reload the models.",
            )
            return
        finally:
            self.busy.emit("")
        self.engine = engine
        self.session_started.emit(header)

    @Slot()
    def step(self) -> None:
        """One round; emits round_ready(Round), or error and the session stays as it was."""
        if self.stop_event.is_set() or self.engine is None or self.engine.finished:
            return
        try:
            rnd = self.engine.step()
        except Exception as e:
            self.engine = None  # its caches may be half-updated: the next Step starts over
            self.error.emit(
                "A round failed",
                f"{type(e).__name__}: {e}\n\nThe rounds so far are kept (you can export "
                "them). Press Step to start a new session with the same prompt.",
            )
            return
        self.round_ready.emit(rnd)

    @Slot(object)
    def update_settings(self, settings: Settings) -> None:
        """K and sampling for the next round of the running session."""
        if self.engine is None:
            return
        try:
            self.engine.update_settings(settings)
        except ValueError as e:
            self.error.emit("Setting not applied", f"{e}.")

    @Slot(object)
    def continue_session(self, settings: Settings) -> None:
        """Go on after max new tokens or end-of-text, with the new settings."""
        if self.engine is None or self.engine.finish_reason not in ("max_new_tokens", "eos"):
            return
        try:
            self.engine.update_settings(settings)
        except ValueError as e:
            self.error.emit("Could not continue", f"{e}.")
            return
        self.engine.finish_reason = None

    @Slot()
    def remeasure(self) -> None:
        """A full cost-model probe after the next round (the Tune panel's Re-measure)."""
        if self.engine is not None:
            self.engine.prober.request_full()

    @Slot(object, object)
    def check_greedy(self, prompt_ids: list, emitted: list) -> None:
        """The target's own greedy decoding of the prompt against the session's tokens."""
        if self.stop_event.is_set() or self.pair is None:
            return
        from specviz.core.decoding.greedy_check import check_greedy

        self.busy.emit(f"decoding {len(emitted)} tokens greedily with the target alone")
        try:
            diff = check_greedy(self.pair, list(prompt_ids), list(emitted))
        except Exception as e:
            self.error.emit("Could not run the greedy check", f"{type(e).__name__}: {e}.")
            return
        finally:
            self.busy.emit("")
        self.greedy_checked.emit((len(emitted), diff))

    @Slot(object, object)
    def compute_position(self, context_ids: list, settings: Settings) -> None:
        """Full-vocabulary p and q (raw and warped) after context_ids, for the lab."""
        if self.stop_event.is_set():
            return
        if self.pair is None:
            self.error.emit("No models loaded", "The lab needs a loaded pair for real models.")
            return
        from specviz.core.drafters.registry import make_drafter
        from specviz.core.lab.position import position_distributions

        self.busy.emit("computing p and q at the position")
        try:
            # the session's own drafter (an early-exit session's q is its first layers')
            drafter = self.engine.drafter if self.engine is not None else None
            if drafter is None and not self.drafter.needs_draft_model:
                drafter = make_drafter(self.drafter, self.pair)
            result = position_distributions(self.pair, list(context_ids), settings, 20, drafter)
        except Exception as e:
            self.error.emit("Could not compute the position", f"{type(e).__name__}: {e}.")
            return
        finally:
            self.busy.emit("")
        self.position_ready.emit(result)


class EngineSignals(QObject):
    """What the session controller speaks to an engine, wherever it runs: the request_*
    signals in, the worker's signals relayed out on the GUI thread. EngineThread (here)
    and gui.session.remote_engine.RemoteEngineThread (a served engine) both are one."""

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
    # the worker's signals, relayed to the GUI thread
    loaded = Signal(object)
    session_started = Signal(object)
    round_ready = Signal(object)
    position_ready = Signal(object)
    greedy_checked = Signal(object)
    error = Signal(str, str)
    busy = Signal(str)

    # request signal -> the worker's slot; the worker's signals re-emitted here
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
    }
    RELAYED = ("loaded", "session_started", "round_ready", "position_ready", "greedy_checked",
               "error", "busy")  # fmt: skip

    def _attach(self, worker: QObject, name: str) -> None:
        """Move `worker` to a new QThread called `name` and wire it to these signals (the
        worker's own signals reach this object through a queued connection: a thread hop);
        the caller starts self.thread."""
        self.worker = worker
        self.thread = QThread()
        self.thread.setObjectName(name)
        worker.moveToThread(self.thread)
        for request, slot in self.REQUESTS.items():
            getattr(self, request).connect(getattr(worker, slot))
        for signal in self.RELAYED:
            if hasattr(worker, signal):
                getattr(worker, signal).connect(getattr(self, signal))

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Stop after the current round or request, end the thread and join it."""
        if not self.thread.isRunning():
            return True
        self.worker.stop_event.set()
        self.thread.quit()
        return self.thread.wait(timeout_ms)


class EngineThread(EngineSignals):
    """Owns the worker's QThread; lives on the GUI thread. Ask with the request_* signals;
    the worker's signals are re-emitted here, on the GUI thread, so that any callable can
    listen (a plain Python callable connected to the worker itself would run on the
    worker's thread)."""

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._attach(Worker(), "specviz-engine")
        self.thread.start()
