"""The life of a session, in one place: GUI thread only, no widgets.

SessionController owns the engine thread, the loaded pair, the Session the views show, its
running statistics, the autosave, the replay cursor of a loaded trace and one State. The
window listens to its signals and redraws; it forwards the user's actions here:

    controls --step/run--> controller --request--> worker (its thread) --Round-->
    controller: Session.append, stats, autosave --rounds_added--> views

A replay feeds stored rounds through the same `rounds_added`, in slices for a long trace.
Questions to the user (discarding unexported rounds) go through `confirm_discard`, which
the window sets; by default every question is answered yes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, QTimer, Signal

from specviz.core.decoding.k_policy import PolicyConfig
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.metrics.running import RoundStats, RunningStats
from specviz.core.trace.records import TREE_SETTINGS, Round, SessionHeader, Settings
from specviz.core.trace.session import Session
from specviz.gui.session.loaded import Loaded
from specviz.gui.session.replay import ReplayMixin
from specviz.gui.session.state import State
from specviz.gui.session.worker import EngineThread

REPLAY_INTERVAL_MS = 80  # pace of Run in a replay
MAX_PENDING_STEPS = 8  # Steps kept while a round is computed (more are refused, said so)


class SessionController(ReplayMixin, QObject):
    """Owns one session's life; emits what the views need. GUI thread only."""

    state_changed = Signal(object)  # State
    session_reset = Signal(object)  # SessionHeader of the new (empty) session, or None
    rounds_added = Signal(object)  # list[tuple[Round, RoundStats]], in order
    pair_changed = Signal(str, str)  # the models' name, device (a replay's: the trace's)
    models_changed = Signal(object)  # Loaded: the pair now loaded (after a load or a failed one)
    error = Signal(str, str)  # title, message
    message = Signal(str, int)  # a status-bar message and how long it shows (ms)
    busy = Signal(str)  # what is in progress ("" when nothing)
    position_ready = Signal(object)  # core.lab.position.PositionDistributions, for the lab

    # While running, ask for round n + 1 before handing round n to the views
    # (benchmarks/gui_redraw.py measures it against asking after the drawing).
    prefetch = True

    def __init__(self, autosave: bool = True, parent: QObject | None = None, engine=None):
        super().__init__(parent)
        self.state = State.NO_MODELS
        self.models: Loaded | None = None
        self.session: Session | None = None  # what the views show
        self.stats: RunningStats | None = None
        self.last_stats: RoundStats | None = None
        self.replay_source: Session | None = None  # a loaded trace (replay mode)
        self.replay_name: str | None = None  # its file name
        self._pending_steps = 0  # Steps pressed while a round was being computed
        self.exported = True  # nothing unsaved
        self.confirm_discard: Callable[[str], bool] = lambda what: True
        self._request: str | None = None  # "load", "start", "step": what the worker does
        # the drafter and K policy of the next session (changed: a new one), and the live one's
        self.drafting: tuple[DrafterConfig, PolicyConfig] = (DrafterConfig(), PolicyConfig())
        self._session_drafting = self.drafting
        self.chat = False  # the next session's prompt as a chat turn (the Setup's Chat box)
        self._draw_until = 0  # a long trace is drawn up to this many rounds
        self.autosaver = None
        if autosave:
            from specviz.core.trace.autosave import Autosaver

            self.autosaver = Autosaver()
        self._replay_timer = QTimer(self)
        self._replay_timer.setInterval(REPLAY_INTERVAL_MS)
        self._replay_timer.timeout.connect(self._replay_tick)
        self.engine = engine or EngineThread(parent=self)  # or a RemoteLink's, given
        self.engine.loaded.connect(self._on_loaded)
        self.engine.session_started.connect(self._on_session_started)
        self.engine.round_ready.connect(self._on_round)
        self.engine.error.connect(self._on_error)
        self.engine.busy.connect(self.busy)
        self.engine.position_ready.connect(self.position_ready)

    # ------------------------------------------------------------------------------ state

    def _set_state(self, state: State) -> None:
        self.state = state
        self.state_changed.emit(state)

    def _idle_state(self) -> State:
        if self.replay_source is not None:
            return State.REPLAY
        if self.models is None:
            return State.NO_MODELS
        if self.session is not None and self.session.finished:
            return State.FINISHED
        if self.session is not None and self.session.rounds:
            return State.PAUSED
        return State.READY

    @property
    def busy_loading(self) -> bool:
        return self._request in ("load", "start")

    @property
    def waiting(self) -> bool:
        """A request is with the worker (at most one at a time: back-pressure)."""
        return self._request is not None

    @property
    def can_step(self) -> bool:
        if self.state in (State.RUNNING, State.REPLAYING, State.CLOSED):
            return False
        return not self.state.live or (self.models is not None and not self.busy_loading)

    @property
    def finish_reason(self) -> str | None:
        if self.session is None or not self.session.rounds:
            return None
        return self.session.rounds[-1].finish_reason

    @property
    def total_rounds(self) -> int:
        """Rounds of the session so far, or of the whole trace in a replay."""
        source = self.replay_source or self.session
        return 0 if source is None else len(source.rounds)

    @property
    def drawing(self) -> bool:
        """A long trace is still being handed to the views."""
        return self.session is not None and len(self.session.rounds) < self._draw_until

    def discard_ok(self, what: str) -> bool:
        """Ask before dropping a session whose rounds were not exported."""
        session = self.replay_source or self.session  # a restored autosave is a replay
        if self.exported or session is None or not session.rounds:
            return True
        return self.confirm_discard(what)

    def _begin(self, session: Session | None) -> None:
        self.session = session
        self.stats = None if session is None else RunningStats.for_header(session.header)
        self.last_stats = None
        self.session_reset.emit(None if session is None else session.header)

    # ------------------------------------------------------------------------------ models

    def load_models(self, target: str, draft: str, device: str = "cpu", dtype: str = "float32"):
        if not self.discard_ok("Loading other models"):
            return
        self._request = "load"
        self.pair_changed.emit(target if draft in ("", target) else f"{target} + {draft}", device)
        self._set_state(State.LOADING)
        # queued before the load: a child engine is started for this drafter (one that
        # needs no draft model is started on the target alone)
        self.engine.request_drafting.emit(*self.drafting)
        self.engine.request_load.emit(target, draft, device, dtype)

    def _on_loaded(self, info: Loaded) -> None:
        self.models = info
        self._request = None
        self._show_pair()
        self.models_changed.emit(info)
        if self.replay_source is None:
            self._begin(None)
            self.exported = True
        self._set_state(self._idle_state())

    def _show_pair(self) -> None:
        info = self.models
        if info is None:
            self.pair_changed.emit("none loaded", "")
            return
        same = info.draft_spec in ("", info.target_spec)
        name = info.target_spec if same else f"{info.target_spec} + {info.draft_spec}"
        self.pair_changed.emit(name, info.device)

    # ------------------------------------------------------------------------------ live

    def step(self, prompt: str, settings: Settings) -> None:
        """One round: of the live session, or the next stored round of a replay. A finished
        session stays as it is: `continue_session` or `new_session` decide what follows."""
        if not self.state.live:
            self._replay_step()
            return
        self._step(prompt, settings, restart=self.state is State.ERROR)

    def _step(self, prompt: str, settings: Settings, restart: bool) -> None:
        """A live Step; restart: the engine lost its session (a round or a start failed)."""
        if self.state in (State.FINISHED, State.CLOSED):
            return
        if self._request is not None:  # back-pressure: one request at a time
            if self.state is not State.RUNNING and self._pending_steps < MAX_PENDING_STEPS:
                self._pending_steps += 1  # taken when the round in progress arrives
                self.message.emit(
                    f"A round is being computed: {self._pending_steps} more Step"
                    f"{'s' if self._pending_steps > 1 else ''} will follow it",
                    3000,
                )
            return
        if self.models is None:
            self.error.emit(
                "No models loaded", "Load a model pair first, or open a trace (Ctrl+O)."
            )
            return
        session = self.session
        # White space added around the prompt (a stray Space) keeps the session.
        changed = session is not None and prompt.strip() != session.header.typed_prompt.strip()
        changed = changed or session is not None and self.drafting != self._session_drafting
        changed = changed or session is not None and self.chat != (session.header.chat is not None)
        if session is None or changed or restart:
            what = "A new prompt or drafter starts a new session" if changed else "Starting again"
            if not self.discard_ok(what):
                self._set_state(self._idle_state())
                return
            self._start_session(prompt, settings)
            return
        self._request = "step"
        self.engine.request_step.emit()

    def _start_session(self, prompt: str, settings: Settings) -> None:
        if not prompt.strip():
            self.error.emit("The prompt is empty", "Type some text for the models to continue.")
            self._set_state(self._idle_state())
            return
        self._request = "start"
        if self.state is not State.RUNNING:
            self._set_state(State.STARTING)
        self._session_drafting = self.drafting
        self.engine.request_drafting.emit(*self.drafting)  # queued: before the start
        self.engine.request_chat.emit(self.chat)
        self.engine.request_start.emit(prompt, settings)

    def _on_session_started(self, header: SessionHeader) -> None:
        self._request = None
        self._begin(Session(header))
        self.exported = True
        self._autosave("start", header)
        running = self.state is State.RUNNING
        self._set_state(State.RUNNING if running else State.READY)
        self._request = "step"  # the Step or Run that asked for the session goes on
        self.engine.request_step.emit()

    def _on_round(self, rnd: Round | list[Round]) -> None:
        """A round, or a list in order drawn at once (a frame's worth from an engine elsewhere),
        from the worker (its thread emitted it; this runs on the GUI thread)."""
        if self._request == "step":
            self._request = None
        rounds, rnd = (rnd, rnd[-1]) if isinstance(rnd, list) else ([rnd], rnd)
        if self.session is None or not self.state.live or rnd.session_id != self.session.session_id:
            return  # a round of a session that was reset meanwhile
        running = self.state is State.RUNNING
        ahead = running and self.prefetch and rnd.finish_reason is None
        if ahead:  # ask for the next round before drawing this one (still one request)
            self._request = "step"
            self.engine.request_step.emit()
        if not (added := self.add_rounds(rounds)):
            return
        self.exported = False
        for rnd in rounds[:added]:
            self._autosave("add", rnd)
        if rnd.finish_reason is not None:
            self._pending_steps = 0
            self._set_state(State.FINISHED)
        elif running:
            self._set_state(State.RUNNING)
            if not ahead:
                QTimer.singleShot(0, self._run_next)  # the next round once this one is drawn
        else:
            self._set_state(State.PAUSED)
            if self._pending_steps:  # Steps pressed while this round was computed
                self._pending_steps -= 1
                self._request = "step"
                self.engine.request_step.emit()

    def _run_next(self) -> None:
        if self.state is State.RUNNING and self._request is None:
            self._request = "step"
            self.engine.request_step.emit()

    def run(self, prompt: str, settings: Settings) -> None:
        """Run until paused or finished (a replay: through its stored rounds)."""
        if not self.state.live:
            if self.replay_source is not None and not self.drawing:
                self._replay_timer.start()
                self._set_state(State.REPLAYING)
            return
        if self.models is None or self.state in (State.FINISHED, State.CLOSED):
            return
        if self.state in (State.LOADING, State.STARTING):
            return
        restart = self.state is State.ERROR
        self._set_state(State.RUNNING)
        if self._request is None:
            self._step(prompt, settings, restart)

    def pause(self) -> None:
        """Stop asking for rounds (one in flight still arrives)."""
        if self.state is State.REPLAYING:
            self._replay_timer.stop()
            self._set_state(State.REPLAY)
        elif self.state is State.RUNNING:
            self._set_state(self._idle_state())

    def apply_settings(self, settings: Settings) -> None:
        if self.state.live and self.session is not None and not self.session.finished:
            if self.drafting != self._session_drafting:  # a new drafter: a new session's
                settings = self._session_tree(settings)  # tree (its drafter may draft none)
            self.engine.request_settings.emit(settings)  # applies from the next round
            self.message.emit("Settings apply from the next round", 3000)

    def _session_tree(self, settings: Settings) -> Settings:
        """settings with the running session's tree fields (they wait for the next
        session while another drafter is chosen for it), and its verifier where either is
        the tree rule (held at it while the width is above 1)."""
        rounds = self.session.rounds
        now = (rounds[-1].settings if rounds else None) or self.session.header.settings
        kept = {n: getattr(now, n) for n in TREE_SETTINGS}
        if "tree" in (now.verifier, settings.verifier):
            kept["verifier"] = now.verifier
        return dataclasses.replace(settings, **kept)

    def continue_session(self, settings: Settings, run: bool = True) -> bool:
        """Go on after max new tokens or end-of-text, with `settings` (a larger maximum, or
        end-of-text ignored). The last round no longer ends the session; run: go on running
        to the new limit (else one round, then paused)."""
        reason = self.finish_reason
        if self.state is not State.FINISHED or reason not in ("max_new_tokens", "eos"):
            return False
        # The round that ended the session becomes a round of the continued one: no finish,
        # and the new limits (a trace allows no finish_reason before the last round, and a
        # round that reaches its max_new_tokens must carry one).
        last = self.session.rounds[-1]
        limits = last.settings and dataclasses.replace(
            last.settings, max_new_tokens=settings.max_new_tokens, ignore_eos=settings.ignore_eos
        )
        self.session.rounds[-1] = dataclasses.replace(last, finish_reason=None, settings=limits)
        self._autosave("start", self.session.header, self.session)  # rewritten, as it goes on
        self.engine.request_continue.emit(settings)
        self._set_state(State.RUNNING if run else State.PAUSED)
        self._request = "step"
        self.engine.request_step.emit()
        return True

    def new_session(self) -> bool:
        """Drop the session (or leave a replay): the next Step starts from the prompt."""
        if not self.discard_ok(
            "Leaving the restored session" if self.replay_source else "Starting over"
        ):
            return False
        self._replay_timer.stop()
        self._draw_until = 0
        self.replay_source = None
        self._begin(None)
        self.exported = True
        self._autosave("finish")
        self._set_state(self._idle_state())
        return True

    def reset(self) -> bool:
        """Start over: a live session is dropped, a replay rewinds to before its first round."""
        if self.replay_source is None:
            return self.new_session()
        self._replay_timer.stop()
        self._draw_until = 0
        self._begin(self.replay_source.rewound())
        self._set_state(State.REPLAY)
        return True

    def _on_error(self, title: str, message: str) -> None:
        failed, self._request = self._request, None
        self._pending_steps = 0
        if failed == "load":
            self._show_pair()  # the pair loaded before (if any) is still there
            self.models_changed.emit(self.models)
            self._set_state(self._idle_state())
        else:
            self._set_state(State.ERROR)
        self.error.emit(title, message)

    # ------------------------------------------------------------------------------ rounds

    def add_rounds(self, rounds: Sequence[Round]) -> int:
        """Append rounds to the session and the statistics, then hand them to the views;
        how many were added (one that does not belong stops it)."""
        added = []
        for rnd in rounds:
            if not self.session.append(rnd):
                break
            self.last_stats = self.stats.add(rnd)
            added.append((rnd, self.last_stats))
        if added:
            self.rounds_added.emit(added)
        return len(added)

    # ------------------------------------------------------------------------------ files

    def exported_to(self) -> None:
        """The session was written to a trace: nothing unsaved."""
        self.exported = True

    def _autosave(self, what: str, *args) -> None:
        if self.autosaver is None:
            return
        try:
            getattr(self.autosaver, what)(*args)
        except OSError as e:
            self.autosaver = None
            self.message.emit(f"Autosave is off: {e}", 10000)

    def remeasure(self) -> None:
        """Fresh cost-model probes after the next round (the Tune panel asks)."""
        self.engine.request_remeasure.emit()

    def run_job(self, job) -> None:
        """A job on the engine's models, on its thread after the request in flight (a Tune
        sweep: gui.tune.sweep_job.SweepJob)."""
        self.engine.request_job.emit(job)

    def request_position(self, round_index: int, position: int) -> bool:
        """Ask the worker for full p and q at a position of the live session (the lab)."""
        if not self.state.live or self.models is None or self.session is None:
            return False
        rnd = self.session.rounds[round_index]
        settings = rnd.settings or self.session.header.settings
        ids = self.session.context_ids(round_index, position)
        self.engine.request_position.emit(ids, settings)
        return True

    # ------------------------------------------------------------------------------ closing

    def shutdown(self) -> None:
        """Stop at a round boundary, join the worker thread, end the autosave (idempotent)."""
        if self.state is State.CLOSED:
            return
        self._replay_timer.stop()
        self._set_state(State.CLOSED)
        self.engine.shutdown()
        self._autosave("finish")
