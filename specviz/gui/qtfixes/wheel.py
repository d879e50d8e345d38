"""The mouse wheel scrolls the panel it is over: a spin box, combo box or slider inside a
scrolled panel changes its value by the wheel only when it has the keyboard focus (clicked
or tabbed to), and a plot inside one zooms only with Ctrl held; otherwise the wheel scrolls
the panel (at 1280x720 the Setup panel and the plot column both scroll, and the pointer
passes over their controls on the way). GUI thread only.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QGraphicsView,
    QScrollArea,
    QSlider,
    QWidget,
)

_VALUE_WIDGETS = (QAbstractSpinBox, QComboBox, QSlider)


def _panel(widget: QWidget) -> QScrollArea | None:
    """The scrolled panel holding `widget` (not a widget's own scroll area)."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QScrollArea):
            return parent
        parent = parent.parentWidget()
    return None


class WheelGuard(QObject):
    """An application event filter (install it once: `install()`)."""

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt's name
        if event.type() != QEvent.Type.Wheel or not isinstance(obj, QWidget):
            return False
        target, parent = obj, obj.parentWidget()
        if isinstance(parent, _VALUE_WIDGETS):
            target = parent  # a spin box's line edit
        elif isinstance(parent, QGraphicsView) and parent.viewport() is obj:
            target = parent  # a plot's viewport
        if isinstance(target, QGraphicsView):
            if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
                return False  # Ctrl + wheel zooms the plot
        elif not isinstance(target, _VALUE_WIDGETS) or target.hasFocus():
            return False
        panel = _panel(target)
        if panel is None:
            return False
        QCoreApplication.sendEvent(panel.verticalScrollBar(), event)
        return True


_guard: WheelGuard | None = None


def install() -> None:
    """Filter the application's wheel events (idempotent)."""
    global _guard
    app = QApplication.instance()
    if app is None or _guard is not None:
        return
    _guard = WheelGuard(app)
    app.installEventFilter(_guard)
