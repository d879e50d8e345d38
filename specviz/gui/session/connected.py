"""The session controller of a window whose engine is elsewhere (`--connect`, `--engine
process`): a connection can be lost, and found again. GUI thread only.

A lost connection keeps the session as it is: every round received stays in it, in its
statistics and in the autosave (they were added as they arrived); the lab falls back to a
position's stored top-N lists. `reconnect()` asks the worker to connect again (its load
does) and keeps the session shown. If the server still has the session (the connection
dropped, the server lived: it keeps a session whose client went away), it is resumed: the
rounds made that the connection lost are added, none twice, and Step goes on; else the next
Step starts a new one (after asking, if the kept rounds were not exported).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from specviz.gui.session.controller import SessionController
from specviz.gui.session.loaded import Loaded
from specviz.gui.session.state import State


class ConnectedController(SessionController):
    """A SessionController on an EngineThread of a RemoteLink (anything with `disconnected(str)` and
    `rounds_ready(list)`)."""

    connection_changed = Signal(str)  # why the connection was lost; "" once connected

    def __init__(self, engine, autosave: bool = True, parent: QObject | None = None):
        super().__init__(autosave, parent, engine=engine)
        self.lost: str | None = None  # why the connection was lost, while it is
        self._load_args: tuple | None = None  # the last load: what reconnect repeats
        self._keep_session = False  # the load in flight is a reconnect
        engine.disconnected.connect(self._on_disconnected)
        engine.rounds_ready.connect(self._on_round)  # while running: a frame's worth, drawn once
        engine.resumed.connect(self._on_resumed)
        self._streaming = False  # the worker was told the window runs
        self.state_changed.connect(self._sync_running)

    def _sync_running(self, state: State) -> None:
        """Run streams rounds from the engine (it never waits for the window to ask); any
        other state stops the stream."""
        running = state is State.RUNNING
        if running != self._streaming:
            self._streaming = running
            self.engine.request_running.emit(running)

    def apply_settings(self, settings) -> None:
        super().apply_settings(settings)
        if self._streaming:
            self.message.emit(
                "Settings apply within a few rounds (the engine runs ahead); each round "
                "records its own",
                5000,
            )

    def load_models(self, target: str, draft: str, device: str = "cpu", dtype: str = "float32"):
        self._load_args = (target, draft, device, dtype)
        super().load_models(target, draft, device, dtype)

    def _on_disconnected(self, reason: str) -> None:
        """The worker lost the connection (worker signal, relayed to the GUI thread)."""
        self.lost = reason
        self.connection_changed.emit(reason)

    def reconnect(self) -> bool:
        """Connect again; the session shown stays. False if it cannot be asked now."""
        if self.lost is None or self._load_args is None or self._request is not None:
            return False
        if self.state is State.CLOSED:
            return False
        self._keep_session = True
        session = self.session
        if session is not None and self.replay_source is None:  # the server may still have it
            self.engine.request_resume.emit(session.header, len(session.rounds))
        self._request = "load"
        self._set_state(State.LOADING)
        self.engine.request_load.emit(*self._load_args)
        return True

    def _on_loaded(self, info: Loaded) -> None:
        keep, self._keep_session = self._keep_session, False
        self.lost = None
        if keep and self.session is not None and self.replay_source is None:
            self.models = info
            self._request = None
            self._show_pair()
            self.models_changed.emit(info)
            # The engine lost its session with the connection: the next Step starts anew.
            self._set_state(State.ERROR)
            self.message.emit(
                "Connected again: the rounds received are kept; Step starts a new session",
                10000,
            )
        else:
            super()._on_loaded(info)
        self.connection_changed.emit("")

    def _on_resumed(self, missed: list | None) -> None:
        """After a reconnect's load: the server still had the session (it goes on, with the
        rounds it made that the connection lost), or None: it ended (Step starts anew)."""
        if missed is None or self.session is None or self.replay_source is not None:
            return
        self._set_state(self._idle_state())
        shown = len(self.session.rounds)
        missed = [rnd for rnd in missed if rnd.index >= shown]  # none twice
        if missed:
            self._on_round(missed)
        self.message.emit(
            f"Connected again: the engine's session goes on ({len(missed)} rounds made "
            "meanwhile were added)",
            10000,
        )

    def _on_error(self, title: str, message: str) -> None:
        reconnecting = self._request == "load" and self.lost is not None
        if self._request == "load":
            self._keep_session = False
        super()._on_error(title, message)
        if reconnecting:  # still lost: the banner says so again
            self.connection_changed.emit(self.lost)

    def _step(self, prompt: str, settings, restart: bool) -> None:
        if self.lost is not None:
            self.error.emit(
                "Not connected to the engine",
                f"{self.lost}.\n\nPress Reconnect (Session menu, or the banner in the "
                "stream); the rounds received so far are kept.",
            )
            self._set_state(State.ERROR)  # the engine's session is gone with the connection
            return
        super()._step(prompt, settings, restart)

    def request_position(self, round_index: int, position: int) -> bool:
        """The full p and q from the engine while connected; else False (the lab then uses
        the position's stored top-N)."""
        if self.lost is not None:
            return False
        return super().request_position(round_index, position)
