"""Windows sized to the screen they open on: a preferred size, never larger than the
screen's available area (a 1280x720 laptop, a task bar). GUI thread only."""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

MARGIN = 16  # room for the window manager's frame


def fit_to_screen(window: QWidget, width: int, height: int) -> None:
    """Resize `window` to width x height, or to what its screen has room for, and keep it
    on that screen."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        window.resize(width, height)
        return
    room = screen.availableGeometry()
    w = min(width, room.width() - MARGIN)
    h = min(height, room.height() - MARGIN)
    window.resize(max(w, 200), max(h, 150))
    frame = window.frameGeometry()
    if not room.contains(frame):
        window.move(room.topLeft())
