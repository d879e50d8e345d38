"""The main window: controls on the left, the token stream above, the distribution panel
and the plots below; menus, toolbar, status bar. GUI thread only.

The window composes views and forwards actions; the session's life (models, rounds,
statistics, autosave, replay, state) is the SessionController's. Data flows one way:
controls -> controller -> worker -> Round -> controller -> `rounds_added` -> views.
"""

from __future__ import annotations

import traceback

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QLayout, QMainWindow, QScrollArea, QSplitter

from specviz.core.metrics.position_bars import DRAFTED, positions
from specviz.core.metrics.speed_tracker import SpeedTracker
from specviz.core.trace.records import SessionHeader
from specviz.gui import dialogs
from specviz.gui.actions import build_actions
from specviz.gui.bench.view import BenchResults
from specviz.gui.distribution.view import DistributionView
from specviz.gui.greedy_check import GreedyCheckPresenter
from specviz.gui.lab.presenter import LabPresenter
from specviz.gui.plots.round_plots import Plots
from specviz.gui.qtfixes import wheel
from specviz.gui.session.connected import ConnectedController
from specviz.gui.session.connection_banner import ConnectionPresenter
from specviz.gui.session.controller import SessionController
from specviz.gui.session.state import State
from specviz.gui.setup.controls import Controls
from specviz.gui.status_bar import StatusBar, engine_words
from specviz.gui.stream.panel import StreamPanel
from specviz.gui.tree.presenter import TreePresenter
from specviz.gui.tune.presenter import TunePresenter
from specviz.gui.view_menu import ViewMenu
from specviz.gui.window_files import Files, local_trace

REFRESH_MS = 250  # while running, plots and bars are redrawn at most this often
FRAME_MS = 50  # while running, the stream, slider and status bar follow at most this often


TITLE = "specviz \u2014 speculative decoding, round by round"


class MainWindow(QMainWindow):
    """The specviz window. Public methods are what the actions (and tests) call."""

    def __init__(self, specs: tuple[str, str] | None = None, device: str = "cpu",
                 dtype: str = "float32", autosave: bool = True, engine=None, drafting=None,
                 load_options=None, load: bool = True):  # fmt: skip
        """specs: (target, draft) to load (draft "": the target alone); engine: the worker's
        thread (gui.session.worker.EngineThread; remote_link's for an engine elsewhere), else
        the pair in this process;
        drafting: the (DrafterConfig, PolicyConfig) to start with; load_options:
        core.models.load_options.LoadOptions for every load (the command line's --device-map, ...);
        load=False: show specs in the Models box without loading them (a replay needs none)."""
        super().__init__()
        wheel.install()  # the wheel scrolls the Setup panel and the plots unless told
        self.setWindowTitle(TITLE)
        self.resize(1500, 950)  # app.main fits it to the screen
        self.setAcceptDrops(True)
        if hasattr(engine, "disconnected"):  # an engine elsewhere: its connection can drop
            self.controller = ConnectedController(engine, autosave, self)
        else:
            self.controller = SessionController(autosave, self, engine=engine)
        self.controller.confirm_discard = self._confirm_discard
        self._follow = True  # select each new round as it arrives
        # (max new tokens, ignore end-of-text) before the session's first Continue
        self._before_continue: tuple[int, bool] | None = None
        self._ask_on_close = True
        self._refresh_timer = QTimer(self)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(REFRESH_MS)
        self._refresh_timer.timeout.connect(self._refresh)
        # Rounds that arrived while running and are not in the stream yet: drawn together at
        # most every FRAME_MS (a round every 10-30 ms each paid its own stream layout, slider,
        # status-bar layout and repaint), and at once when the run pauses or ends.
        self._unshown: list = []
        self._frame_timer = QTimer(self)
        self._frame_timer.setSingleShot(True)
        self._frame_timer.setInterval(FRAME_MS)
        self._frame_timer.timeout.connect(self._show_rounds)

        self.controls = Controls()
        self.stream = StreamPanel()
        self.distribution = DistributionView()
        self.plots = Plots()
        self._compose()
        self.tree = TreePresenter(self)  # a Tree tab and plot while the session has trees
        self.status = StatusBar(self)
        self.setStatusBar(self.status)
        exporters = {name: self.plots for name in self.plots.plots}
        exporters["distribution"] = self.distribution
        self.files = Files(self, self.controller, self.status, exporters)
        self.lab = LabPresenter(self.controller, self.distribution)
        self.tune = TunePresenter(self.controller, self.controls, self.files.open_trace)
        self.bench = BenchResults(self)
        self.greedy = GreedyCheckPresenter(self.controller, self)
        self.speed = SpeedTracker()  # the cost model's figures of the session shown
        self.actions_ = build_actions(self)
        self.view_menu = ViewMenu(self)
        self.status.set_engine(engine_words(engine))
        if isinstance(self.controller, ConnectedController):
            self.connection = ConnectionPresenter(self, self.controller)

        c = self.controller
        c.state_changed.connect(self._on_state)
        c.session_reset.connect(self._on_session_reset)
        c.rounds_added.connect(self._on_rounds_added)
        c.pair_changed.connect(self.status.set_pair)
        c.models_changed.connect(self._on_models)
        c.busy.connect(self.status.set_busy)
        c.message.connect(self.status.showMessage)
        c.error.connect(lambda title, text: dialogs.error(self, title, text))
        self.controls.load_requested.connect(self.load_models)
        self.controls.drafting_box.changed.connect(lambda *d: setattr(c, "drafting", d))
        self.controls.chat_check.toggled.connect(lambda on: setattr(c, "chat", on))
        if drafting is not None:
            self.controls.drafting_box.set_drafting(*drafting)
            self.controls._drafter_changed()
        c.drafting = self.controls.drafting()
        if load_options is not None:
            c.engine.request_load_options.emit(load_options)
        self.controls.settings_changed.connect(c.apply_settings)
        self.stream.view.position_selected.connect(self.select_position)
        self.stream.round_chosen.connect(self.select_round)
        self.stream.follow_requested.connect(
            lambda: self.session and self.select_round(len(self.session.rounds) - 1)
        )
        self.stream.banner.continue_requested.connect(self.continue_session)
        self.stream.banner.new_requested.connect(self.new_session)
        self.stream.banner.rewind_requested.connect(self.reset)
        self._on_state(c.state)
        if specs is not None:
            self.controls.set_specs(*specs)
            self.controls.set_device(device, dtype)
            if load:
                self.load_models(*specs, device, dtype)

    def _compose(self) -> None:
        scroll = QScrollArea()
        scroll.setWidget(self.controls)
        scroll.setWidgetResizable(True)
        scroll.setMinimumWidth(260)
        scroll.setMaximumWidth(340)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        dock = QDockWidget("Setup", self)
        dock.setObjectName("setup-dock")
        dock.setWidget(scroll)
        dock.setFeatures(QDockWidget.DockWidgetFeature.NoDockWidgetFeatures)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        self.left_splitter = left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.stream)
        left.addWidget(self.distribution)
        left.setChildrenCollapsible(False)
        left.setStretchFactor(0, 2)
        left.setStretchFactor(1, 3)
        left.setSizes([360, 520])
        self.main_splitter = main = QSplitter(Qt.Orientation.Horizontal)
        main.addWidget(left)
        main.addWidget(self.plots)
        self.plots.setMinimumWidth(340)  # the plots' titles and legends fit from here
        main.setChildrenCollapsible(False)
        main.setStretchFactor(0, 3)
        main.setStretchFactor(1, 2)
        main.setSizes([760, 470])
        self.setCentralWidget(main)
        # The window's minimum size is fixed here, not recomputed by the layout whenever a
        # label's text changes (on some platforms each change is a round trip, or a warning).
        self.layout().setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self.setMinimumSize(960, 600)

    # ------------------------------------------------------------------------------ state

    @property
    def state(self) -> State:
        return self.controller.state

    @property
    def session(self):
        return self.controller.session

    def _on_state(self, state: State) -> None:
        c = self.controller
        self.status.set_state(state.value)
        running = state in (State.RUNNING, State.REPLAYING)
        self.actions_.run.setChecked(running)
        self.actions_.run.setText("Pause" if running else "Run")
        self.actions_.step.setEnabled(c.can_step)
        self.actions_.run.setEnabled(running or c.can_step and state is not State.FINISHED)
        can_go_on = state is State.FINISHED and c.finish_reason in ("max_new_tokens", "eos")
        self.actions_.continue_.setEnabled(can_go_on)
        self.controls.load_button.setEnabled(state is not State.LOADING)
        self._show_banner()
        if not running and self._unshown:
            self._show_rounds()  # paused or finished: the stream shows every round
        if not running and self._refresh_timer.isActive():
            self._refresh()  # paused or finished: draw what the throttle held back

    def show_output_only(self, on: bool) -> None:
        """View > Output only: the session's emitted text alone, or the coloured stream."""
        session = self.controller.session
        self.stream.set_output_only(on, session.text if session is not None else "")

    def _show_banner(self) -> None:
        """The end banner: a finished live session, or a replay showing its last round."""
        c = self.controller
        if c.state is State.FINISHED:
            self.stream.banner.show_end(c.finish_reason)
        elif c.state is State.REPLAY and c.replay_at_end and not self._unshown:
            last = c.replay_source.rounds[-1].finish_reason if c.replay_source.rounds else None
            self.stream.banner.show_replay_end(c.replay_name, len(c.session.rounds), last)
        else:
            self.stream.banner.hide()

    def _on_models(self, info) -> None:
        """The Models box shows the pair that is loaded (not one that failed to load)."""
        if info is not None:
            self.controls.set_specs(info.target_spec, info.draft_spec)
            self.controls.set_device(info.device)
            self.controls.offer_chat(info.instruct)

    def _confirm_discard(self, what: str) -> bool:
        session = self.controller.replay_source or self.controller.session
        return dialogs.ask(
            self,
            "Discard this session?",
            f"{what}: the {len(session.rounds)} rounds of this session were not exported "
            "and will be discarded (Export trace, Ctrl+S, keeps them). Continue?",
        )

    # ------------------------------------------------------------------------------ actions

    def load_models(self, target: str, draft: str, device: str = "cpu", dtype: str = "float32"):
        self.controller.load_models(target, draft, device, dtype)

    def step(self) -> None:
        """One round (F10 / Space): of the live session, or the next round of a replay."""
        if self.controller.state is State.FINISHED or self._replay_done():
            self._point_at_banner()
            return
        self.controller.step(self.controls.prompt(), self.controls.settings())

    def toggle_run(self) -> None:
        """Run / Pause (F5 / R). A finished session stays finished: the banner says why."""
        c = self.controller
        if c.state in (State.RUNNING, State.REPLAYING):
            c.pause()
        elif c.state is State.FINISHED or self._replay_done():
            self._point_at_banner()
        else:
            c.run(self.controls.prompt(), self.controls.settings())
        self._on_state(c.state)

    def _replay_done(self) -> bool:
        return self.controller.state is State.REPLAY and self.controller.replay_at_end

    def _point_at_banner(self) -> None:
        if self._replay_done():
            text = "The replay is at its last round: Replay from the start (Reset) or Leave it"
        else:
            text = "The session has ended: Continue or New session (in the stream)"
        self.status.showMessage(text, 5000)
        self.stream.banner.flash()

    def continue_session(self) -> None:
        """Go on after the session ended: more tokens (and past end-of-text if it ended
        there)."""
        reason = self.controller.finish_reason
        spin, eos = self.controls.max_tokens_spin, self.controls.ignore_eos_check
        if self._before_continue is None:  # what New session goes back to
            self._before_continue = (spin.value(), eos.isChecked())
        base = self._before_continue[0]
        if reason == "eos":
            eos.setChecked(True)
        elif reason == "max_new_tokens":
            spin.setValue(spin.value() + base)  # as many again as the session first asked
        self.controller.continue_session(self.controls.settings())

    def reset(self) -> None:
        """Start over: a live session is dropped, a replay rewinds to its first round."""
        self.controller.reset()

    def new_session(self) -> None:
        """Leave a replay (or drop a live session): the next Step starts from the prompt."""
        self.controller.new_session()

    def open_lab(self) -> None:
        self.lab.open()

    def open_tune(self) -> None:
        self.tune.open()

    def remeasure(self) -> None:
        """A full cost-model probe after the next round (as the Tune panel's button)."""
        if self.controller.state.live and self.controller.session is not None:
            self.controller.remeasure()
            self.status.showMessage("The costs are measured again after the next round", 4000)
        else:
            self.status.showMessage("Re-measure needs a live session", 4000)

    def check_greedy(self) -> None:
        """The target's own greedy decoding against the session's tokens (worker thread)."""
        self.greedy.check()

    # ------------------------------------------------------------------------------ views

    def _on_session_reset(self, header: SessionHeader | None) -> None:
        self._refresh_timer.stop()
        self._frame_timer.stop()
        self._unshown.clear()
        self._follow = True
        if self._before_continue is not None:  # a new session starts from the user's limits
            limit, ignore = self._before_continue
            self._before_continue = None
            for widget in (self.controls.max_tokens_spin, self.controls.ignore_eos_check):
                widget.blockSignals(True)
            self.controls.max_tokens_spin.setValue(limit)
            self.controls.ignore_eos_check.setChecked(ignore)
            for widget in (self.controls.max_tokens_spin, self.controls.ignore_eos_check):
                widget.blockSignals(False)
        self.stream.clear(header)
        self.distribution.show_position(None)
        self.plots.clear()
        self.speed = SpeedTracker(header)
        self.status.new_session(header, replay=self.controller.replay_source is not None)
        name = self.controller.replay_name if self.controller.replay_source else None
        self.setWindowTitle(f"specviz \u2014 {name} (replay)" if name else TITLE)
        if header is not None:
            self.controls.show_session(header)
            if self.controller.replay_source is not None:  # what the trace drafted with
                self.controls.drafting_box.show_header(header)

    def _on_rounds_added(self, added: list) -> None:
        """New rounds in the session: their figures go into the plots' series at once (every
        round's point, exact); on a Step the stream, slider, status bar, plots and
        distribution panel show them at once. While running, the stream, slider and status
        bar follow at most every FRAME_MS, the plots and the distribution panel (the costly
        paints) at most every REFRESH_MS; a long replay's drawing shows its slices as they
        come and draws the plots once at its end."""
        c = self.controller
        for rnd, stats in added:
            self.plots.add(stats, c.stats, redraw=False, speed=self.speed.add(rnd))
        self._unshown.extend(rnd for rnd, _ in added)
        running = c.state in (State.RUNNING, State.REPLAYING)
        if not running:
            self._show_rounds()
        elif not self._frame_timer.isActive():
            self._frame_timer.start()
        if c.drawing:
            return
        if running:
            if not self._refresh_timer.isActive():
                self._refresh_timer.start()
        else:
            self._refresh()

    def _show_rounds(self) -> None:
        """The stream, slider and status bar show every round of the session."""
        self._frame_timer.stop()
        c = self.controller
        if not self._unshown or c.session is None:
            return
        self.stream.append_rounds(self._unshown)
        self._unshown = []
        self._show_banner()
        self.stream.set_output_text(c.session.text)
        self.stream.set_total(c.total_rounds)
        self.status.set_figures(c.last_stats, len(c.session.rounds), c.stats)
        self.status.set_speed(self.speed.latest)

    def _refresh(self) -> None:
        """Draw the plots and, when following the newest round, select it."""
        self._refresh_timer.stop()
        session = self.controller.session
        if session is None:
            return
        self._show_rounds()  # the stream holds the round selected below
        self.plots.redraw()
        if self._follow and session.rounds:
            self.select_round(len(session.rounds) - 1)

    def select_round(self, index: int) -> None:
        """Show a round at its most telling position: the rejection if there was one,
        else the last accepted draft (its accept test), else the bonus token."""
        rnd = self.controller.session.rounds[index]
        drafted = sum(1 for t in rnd.tokens if t.status in DRAFTED)
        position = rnd.n_accepted if rnd.n_accepted < drafted else max(drafted - 1, 0)
        self.select_position(index, min(position, positions(rnd) - 1))

    def select_position(self, round_index: int, position: int) -> None:
        session = self.controller.session
        rnd = session.rounds[round_index]
        # selecting the newest round follows new ones; an older one stays put
        self._follow = round_index == len(session.rounds) - 1
        self.stream.set_following(self._follow)
        self.stream.view.select(round_index, position)
        self.stream.show_round(round_index)
        self.distribution.show_position(rnd, position, self.session)
        self.tree.show_position(rnd, position)
        self.plots.mark_round(round_index)

    # ------------------------------------------------------------------------------ files

    def dragEnterEvent(self, event) -> None:
        if local_trace(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event) -> None:
        path = local_trace(event.mimeData())
        if path:
            event.acceptProposedAction()
            self.files.open_trace(path)

    # ------------------------------------------------------------------------------ closing

    def close_now(self) -> None:
        """Close without asking (SPECVIZ_QUIT_AFTER_MS, scripted runs)."""
        self._ask_on_close = False
        self.close()

    def closeEvent(self, event) -> None:
        c = self.controller
        try:
            if self._ask_on_close and c.state is not State.CLOSED:
                was_running = c.state is State.RUNNING
                c.pause()  # no new rounds while the question is open
                if not c.discard_ok("Quitting"):
                    event.ignore()
                    if was_running:  # carry on as before
                        c.run(self.controls.prompt(), self.controls.settings())
                    return
        except Exception:  # an exception leaving a Qt override takes the process down
            traceback.print_exc()
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Stop at a round boundary, join the worker thread, close the lab (idempotent)."""
        self._refresh_timer.stop()
        self._frame_timer.stop()
        self.lab.close()
        self.tune.close()
        self.controller.shutdown()
