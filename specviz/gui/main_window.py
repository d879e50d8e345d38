"""The main window: controls on the left, the token stream above, the distribution panel
and the plots below; menus, toolbar, status bar. GUI thread only.

Data flows one way: controls -> worker (its thread) -> Round -> `_on_round` ->
Session.append -> views. A replay feeds stored rounds through the same `_show_round`.
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QLayout, QMainWindow, QScrollArea, QSplitter

from ..core.bars import positions
from ..core.session import Session
from ..core.stats import RunningStats
from ..core.trace import Round, SessionHeader
from . import dialogs
from .actions import build_actions
from .controls import Controls
from .distribution_view import DistributionView
from .files import FilesMixin
from .plots import Plots
from .replay import ReplayMixin
from .status import StatusBar
from .stream_panel import StreamPanel
from .worker import EngineThread, Loaded

REFRESH_MS = 250  # while running, plots and bars are redrawn at most this often


class MainWindow(ReplayMixin, FilesMixin, QMainWindow):
    """The specviz window. Public methods are what the actions (and tests) call."""

    # While running, ask for round n + 1 before drawing round n (benchmarks/gui_redraw.py
    # measures it against asking after the drawing).
    prefetch = True

    def __init__(self, specs: tuple[str, str] | None = None, device: str = "cpu",
                 dtype: str = "float32", autosave: bool = True):  # fmt: skip
        super().__init__()
        self.setWindowTitle("specviz \u2014 speculative decoding, round by round")
        self.resize(1500, 950)
        self.setAcceptDrops(True)
        self.session: Session | None = None  # what the views show
        self.stats: RunningStats | None = None
        self.replay_source: Session | None = None  # a loaded trace (replay mode)
        self.models: Loaded | None = None
        self.running = False
        self.inflight: str | None = None  # "load", "start", "step": what the worker is doing
        self.pending_step = False  # step once the session has started
        self.needs_restart = False  # the engine lost its session (a failed round)
        self.exported = True  # nothing unsaved
        self.state = ""
        self._closing = False
        self._force_close = False
        self.last_stats = None
        self.init_replay()
        self._refresh_timer = QTimer(self)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(REFRESH_MS)
        self._refresh_timer.timeout.connect(self._refresh)
        self.follow = True  # select each new round as it arrives

        self.controls = Controls()
        self.stream = StreamPanel()
        self.distribution = DistributionView()
        self.plots = Plots()
        self._compose()
        self.status = StatusBar(self)
        self.setStatusBar(self.status)
        self.actions_ = build_actions(self)

        self.engine = EngineThread(self)
        self.engine.loaded.connect(self._on_loaded)
        self.engine.session_started.connect(self._on_session_started)
        self.engine.round_ready.connect(self._on_round)
        self.engine.error.connect(self._on_error)
        self.engine.busy.connect(self.status.set_busy)
        self.controls.load_requested.connect(self.load_models)
        self.controls.settings_changed.connect(self._on_settings)
        self.stream.view.position_selected.connect(self.select_position)
        self.stream.round_chosen.connect(self.select_round)
        self.init_files(autosave)
        self._set_state("no models")
        if specs is not None:
            self.controls.set_specs(*specs)
            self.controls.set_device(device, dtype)
            self.load_models(*specs, device, dtype)

    def _compose(self) -> None:
        scroll = QScrollArea()
        scroll.setWidget(self.controls)
        scroll.setWidgetResizable(True)
        scroll.setMinimumWidth(300)
        scroll.setMaximumWidth(360)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        dock = QDockWidget("Setup", self)
        dock.setObjectName("setup-dock")
        dock.setWidget(scroll)
        dock.setFeatures(QDockWidget.DockWidgetFeature.NoDockWidgetFeatures)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.stream)
        left.addWidget(self.distribution)
        left.setSizes([360, 520])
        main = QSplitter(Qt.Orientation.Horizontal)
        main.addWidget(left)
        main.addWidget(self.plots)
        main.setStretchFactor(0, 3)
        main.setStretchFactor(1, 2)
        main.setSizes([760, 470])
        self.setCentralWidget(main)
        # The window's minimum size is fixed here, not recomputed by the layout whenever a
        # label's text changes (on some platforms each change is a round trip, or a warning).
        self.layout().setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self.setMinimumSize(960, 640)

    # ------------------------------------------------------------------------------ state

    def _set_state(self, state: str) -> None:
        self.state = state
        self.status.set_state(state)
        replay = state == "replay"
        self.actions_.run.setChecked(self.running or self._replay_timer.isActive())
        self.actions_.run.setText("Pause" if self.actions_.run.isChecked() else "Run")
        busy = self.inflight in ("load", "start")
        can_step = replay or (self.models is not None and not busy)
        self.actions_.step.setEnabled(can_step and not self.running)
        self.actions_.run.setEnabled(can_step)
        self.controls.load_button.setEnabled(self.inflight != "load")

    def _idle_state(self) -> str:
        if self.replay_source is not None:
            return "replay"
        if self.models is None:
            return "no models"
        if self.session is not None and self.session.finished:
            return "finished"
        if self.session is not None and self.session.rounds:
            return "paused"
        return "ready"

    @property
    def live(self) -> bool:
        return self.replay_source is None

    def _discard_ok(self, what: str) -> bool:
        """Ask before dropping a live session whose rounds were not exported."""
        session = self.replay_source or self.session  # a restored autosave is a replay
        if self.exported or session is None or not session.rounds:
            return True
        return dialogs.ask(
            self,
            "Discard this session?",
            f"{what}: the {len(session.rounds)} rounds of this session were not exported "
            "and will be discarded (Export trace, Ctrl+S, keeps them). Continue?",
        )

    # ------------------------------------------------------------------------------ models

    def load_models(self, target: str, draft: str, device: str = "cpu", dtype: str = "float32"):
        if not self._discard_ok("Loading other models"):
            return
        self.running = False
        self.inflight = "load"
        self.status.set_pair(f"{target} + {draft}" if target != draft else target, device)
        self._set_state("loading")
        self.engine.request_load.emit(target, draft, device, dtype)

    def _on_loaded(self, info: Loaded) -> None:
        self.models = info
        self.inflight = None
        self._show_models()
        if self.live:
            self._clear_views(None)
            self.session = None
            self.exported = True
        self._set_state(self._idle_state())

    def _show_models(self) -> None:
        info = self.models
        if info is None:
            self.status.set_pair("none loaded", self.controls.device())
            return
        same = info.target_spec == info.draft_spec
        name = info.target_spec if same else f"{info.target_spec} + {info.draft_spec}"
        self.status.set_pair(name, info.device)

    # ------------------------------------------------------------------------------ live

    def step(self) -> None:
        """One round (Space): of the live session, or the next stored round of a replay."""
        if not self.live:
            self._replay_step()
            return
        if self.inflight is not None:
            return  # back-pressure: one request at a time
        if self.models is None:
            dialogs.error(
                self, "No models loaded", "Load a model pair first, or open a trace (Ctrl+O)."
            )
            return
        prompt = self.controls.prompt()
        session = self.session
        if (
            session is None
            or session.finished
            or self.needs_restart
            or prompt != session.header.prompt
        ):
            changed = session is not None and prompt != session.header.prompt
            if session is not None and not self._discard_ok(
                "A changed prompt starts a new session" if changed else "Starting a new session"
            ):
                self.running = False
                self._set_state(self._idle_state())
                return
            self._start_session(prompt)
            return
        self.inflight = "step"
        self.engine.request_step.emit()

    def _start_session(self, prompt: str) -> None:
        if not prompt.strip():
            self.running = False
            dialogs.error(self, "The prompt is empty", "Type some text for the models to continue.")
            self._set_state(self._idle_state())
            return
        self.inflight = "start"
        self.pending_step = True
        self.needs_restart = False
        self._set_state("loading")
        self.engine.request_start.emit(prompt, self.controls.settings())

    def _on_session_started(self, header: SessionHeader) -> None:
        self.inflight = None
        self._begin_session(Session(header))
        self.exported = True
        self.autosave_start(header)
        self._set_state("running" if self.running else "ready")
        if self.pending_step:
            self.pending_step = False
            self.step()

    def _on_round(self, rnd: Round) -> None:
        """A round from the worker (its thread emitted it; this runs on the GUI thread)."""
        if self.inflight == "step":
            self.inflight = None
        if self.session is None or not self.live or rnd.session_id != self.session.session_id:
            return  # a round of a session that was reset meanwhile
        ahead = self.running and self.prefetch and rnd.finish_reason is None
        if ahead and not self._closing:
            # Ask for the next round before drawing this one: the worker computes it on the
            # other core meanwhile. Still one request at a time (back-pressure).
            self.step()
        if not self._show_round(rnd):
            return
        self.exported = False
        self.autosave_round(rnd)
        if rnd.finish_reason is not None:
            self.running = False
            self._refresh()
            self._set_state("finished")
        elif self.running:
            self._set_state("running")
            if not ahead:
                QTimer.singleShot(0, self._run_next)  # the next round once this one is drawn
        else:
            self._refresh()
            self._set_state("paused")

    def _run_next(self) -> None:
        if self.running and not self._closing:
            self.step()

    def toggle_run(self) -> None:
        """Run / Pause (R)."""
        if not self.live:
            if self._replay_timer.isActive():
                self._replay_timer.stop()
                self._refresh()
            elif self.replay_source is not None:
                self._replay_timer.start()
            self._set_state("replay")
            return
        if self.running:
            self.running = False  # pause: stop asking; a round in flight still arrives
            self._refresh()
            self._set_state("paused" if self.session and self.session.rounds else "ready")
            return
        if self.models is None:
            self._set_state(self._idle_state())
            return
        self.running = True
        self._set_state("running")
        self.step()

    def reset(self) -> None:
        """Start over: a live session is dropped, a replay rewinds to before its first round."""
        if not self.live:
            self.rewind()
            return
        if not self._discard_ok("Reset starts over"):
            return
        self.running = False
        self.pending_step = False
        self.session = None
        self.exported = True
        self._clear_views(None)
        self._set_state(self._idle_state())

    def new_session(self) -> None:
        """Leave a replay (or reset a live session): the next Step starts from the prompt."""
        if self.replay_source is not None:
            if not self._discard_ok("Leaving the restored session"):
                return
            self._replay_timer.stop()
            self.replay_source = None
            self.session = None
            self.exported = True
            self._clear_views(None)
            self._set_state(self._idle_state())
        else:
            self.reset()

    def _on_settings(self, settings) -> None:
        if self.live and self.session is not None and not self.session.finished:
            self.engine.request_settings.emit(settings)  # applies from the next round
            self.status.showMessage("Settings apply from the next round", 3000)

    def _on_error(self, title: str, message: str) -> None:
        failed = self.inflight
        self.inflight = None
        self.running = False
        self.pending_step = False
        if failed == "step":
            self.needs_restart = True
        if failed == "load":
            self._show_models()  # the pair loaded before (if any) is still there
        self._set_state("error")
        dialogs.error(self, title, message)

    # ------------------------------------------------------------------------------ views

    def _clear_views(self, header: SessionHeader | None) -> None:
        self.stream.clear(header)
        self.distribution.show_position(None)
        self.plots.clear()
        self.status.set_figures(None, 0)

    def _begin_session(self, session: Session) -> None:
        self.session = session
        self.follow = True
        self._draw_until = 0
        self.stats = RunningStats.for_header(session.header)
        self._clear_views(session.header)

    def _show_round(self, rnd: Round, redraw: bool = True) -> bool:
        """Append a round to the session and the views; False if it does not belong.

        The stream, slider and status bar show it at once; the plots and the distribution
        panel (the costly paints) follow at most every REFRESH_MS while running."""
        if not self._add_rounds((rnd,)):
            return False
        if redraw:
            self.status.set_figures(self.last_stats, len(self.session.rounds))
            if self.running or self._replay_timer.isActive():
                if not self._refresh_timer.isActive():
                    self._refresh_timer.start()
            else:
                self._refresh()
        return True

    def _add_rounds(self, rounds: Sequence[Round]) -> int:
        """Append rounds to the session, the statistics, the plot series and the stream (in
        one edit), drawing nothing; how many were added (one that does not belong, of
        another session or out of order, stops it)."""
        added = []
        for rnd in rounds:
            if not self.session.append(rnd):
                break
            self.last_stats = self.stats.add(rnd)
            self.plots.add(self.last_stats, self.stats, redraw=False)
            added.append(rnd)
        if added:
            self.stream.append_rounds(added)
        return len(added)

    def _refresh(self) -> None:
        """Draw the plots and, when following the newest round, select it."""
        self._refresh_timer.stop()
        if self.session is None:
            return
        self.plots.redraw()
        if self.follow and self.session.rounds:
            self.select_round(len(self.session.rounds) - 1)

    def select_round(self, index: int) -> None:
        """Show a round at its most telling position: the rejection if there was one,
        else the last accepted draft (its accept test), else the bonus token."""
        rnd = self.session.rounds[index]
        drafted = sum(1 for t in rnd.tokens if t.status in ("accepted", "rejected", "discarded"))
        position = rnd.n_accepted if rnd.n_accepted < drafted else max(drafted - 1, 0)
        self.select_position(index, min(position, positions(rnd) - 1))

    def select_position(self, round_index: int, position: int) -> None:
        rnd = self.session.rounds[round_index]
        # selecting the newest round follows new ones; an older one stays put
        self.follow = round_index == len(self.session.rounds) - 1
        self.stream.view.select(round_index, position)
        self.stream.show_round(round_index)
        self.distribution.show_position(rnd, position, self.session)
        self.plots.mark_round(round_index)

    # ------------------------------------------------------------------------------ closing

    def close_now(self) -> None:
        """Close without asking (SPECVIZ_QUIT_AFTER_MS, scripted runs)."""
        self._force_close = True
        self.close()

    def closeEvent(self, event) -> None:
        try:
            if not (self._closing or self._force_close):
                was_running, self.running = self.running, False  # no new rounds meanwhile
                if not self._discard_ok("Quitting"):
                    event.ignore()
                    if was_running:  # carry on as before
                        self.running = True
                        self._set_state("running")
                        if self.inflight is None:
                            self.step()
                    return
        except Exception:  # an exception leaving a Qt override takes the process down
            traceback.print_exc()
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Stop at a round boundary and join the worker thread (idempotent)."""
        if self._closing:
            return
        self._closing = True
        self.running = False
        self._replay_timer.stop()
        self.engine.shutdown()
        self.close_lab()
        self.autosave_close(clean=True)
