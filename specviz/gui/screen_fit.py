"""Windows sized to the screen they open on: a preferred size, never larger than the
screen's available area (a 1280x720 laptop, a task bar). GUI thread only."""

from __future__ import annotations

from PySide6.QtCore import QMargins, QRect
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


# A window manager's frame, estimated: it is known only once the window is shown, and then
# a title bar of 30-40 px had already pushed the status bar below the screen's edge.
FRAME = QMargins(8, 40, 8, 8)


def show_fitted(window: QWidget, width: int, height: int, room: QRect | None = None) -> None:
    """Show `window` at width x height, its frame inside the screen's available area
    (`room`; default: its screen's): on a screen too small for the size and a frame, shown
    maximized (the window manager fits the frame), else sized and moved inside it."""
    if room is None:
        screen = window.screen() or QGuiApplication.primaryScreen()
        room = screen.availableGeometry() if screen is not None else None
    if room is None:
        window.resize(width, height)
        window.show()
        return
    inner = room.marginsRemoved(FRAME)
    if inner.width() < width or inner.height() < height:
        # the size that fits with a frame, for a display without a window manager (which
        # would leave a maximized window at its old size)
        window.resize(min(width, inner.width()), min(height, inner.height()))
        window.move(room.topLeft())
        window.showMaximized()
        return
    window.resize(width, height)
    window.move(room.topLeft())  # a window's position is its frame's
    window.show()
