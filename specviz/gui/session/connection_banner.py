"""What the window shows of its connection to an engine elsewhere (`--connect`, `--engine
process`): a banner in the stream and a status-bar label while the connection is lost, and a
Reconnect action (Session menu, and the banner's button). GUI thread only.

The text is the client's message, which may quote the server: plain text only.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from specviz.gui import palette
from specviz.gui.session.connected import ConnectedController
from specviz.gui.session.state import State


class ConnectionBanner(QFrame):
    """A banner: the connection was lost, why, the rounds are kept; and a Reconnect button."""

    reconnect_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("connection-banner")
        self.text = QLabel()
        self.text.setTextFormat(Qt.TextFormat.PlainText)
        self.text.setWordWrap(True)
        self.reconnect_button = QPushButton("Reconnect")
        self.reconnect_button.setToolTip("Connect to the engine again (the rounds stay)")
        self.reconnect_button.clicked.connect(self.reconnect_requested)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 8, 4)
        row.addWidget(self.text, 1)
        row.addWidget(self.reconnect_button)
        border = palette.fate("rejected").foreground
        self.setStyleSheet(
            f"#connection-banner {{ background: {palette.PROMPT_BACKGROUND}; "
            f"border: 2px solid {border}; border-radius: 4px; }}"
        )
        self.hide()

    def show_lost(self, reason: str, rounds: int) -> None:
        kept = f"The {rounds} rounds received are kept" if rounds else "No rounds were lost"
        self.text.setText(
            f"The connection to the engine was lost: {reason}. {kept} (Export trace, "
            "Ctrl+S, saves them; the autosave has them too)."
        )
        self.show()


class ConnectionPresenter:
    """Wires a ConnectedController to the window: banner, status label, Reconnect."""

    def __init__(self, window, controller: ConnectedController):
        self.window = window
        self.controller = controller
        self.banner = ConnectionBanner()
        layout = window.stream.layout()
        layout.insertWidget(layout.indexOf(window.stream.banner), self.banner)
        self.label = QLabel("")
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setStyleSheet(f"color: {palette.fate('rejected').foreground}")
        window.status.insertPermanentWidget(0, self.label)
        self.action = QAction("Reconnect", window)
        self.action.setStatusTip("Connect to the engine again; the rounds received stay")
        self.action.triggered.connect(self.reconnect)
        self.action.setEnabled(False)
        for menu_action in window.menuBar().actions():
            if menu_action.text() == "&Session" and menu_action.menu() is not None:
                menu_action.menu().addAction(self.action)
        self.banner.reconnect_requested.connect(self.reconnect)
        controller.connection_changed.connect(self._on_connection)
        controller.state_changed.connect(self._on_state)

    def _on_connection(self, reason: str) -> None:
        session = self.controller.session
        if reason:
            self.banner.show_lost(reason, len(session.rounds) if session is not None else 0)
            self.label.setText("connection lost")
            self.window.status.showMessage(f"The connection to the engine was lost: {reason}")
        else:
            self.banner.hide()
            self.label.setText("")
        self._on_state(self.controller.state)

    def _on_state(self, state: State) -> None:
        can = self.controller.lost is not None and state is not State.LOADING
        self.action.setEnabled(can)
        self.banner.reconnect_button.setEnabled(can)

    def reconnect(self) -> None:
        if self.controller.reconnect():
            self.banner.text.setText("Connecting to the engine again\u2026")
