"""Questions and messages to the user, in one place so that tests and scripted runs can
answer them: set AUTO_ANSWER (or monkeypatch `ask` / `error`). GUI thread only.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

# None: ask the user with a real dialog. True / False: answer every question so, show no
# dialog (tests, SPECVIZ_QUIT_AFTER_MS runs); messages are then only recorded in `shown`.
AUTO_ANSWER: bool | None = None
shown: list[tuple[str, str, str]] = []  # (kind, title, text) of every message, newest last
ECHO = False  # also print every message to stderr (scripted runs)


def _record(kind: str, title: str, text: str) -> None:
    shown.append((kind, title, text))
    if ECHO:
        print(f"specviz: {kind}: {title}: {text}", file=sys.stderr)


def ask(parent: QWidget | None, title: str, text: str) -> bool:
    """A yes / no question; True for yes."""
    _record("question", title, text)
    if AUTO_ANSWER is not None:
        return AUTO_ANSWER
    buttons = QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
    box = message_box(parent, QMessageBox.Icon.Question, title, text, buttons)
    box.setDefaultButton(QMessageBox.StandardButton.No)
    return box.exec() == QMessageBox.StandardButton.Yes


def message_box(parent: QWidget | None, icon, title: str, text: str, buttons) -> QMessageBox:
    """A message box that shows its text as plain text: messages quote file names, token
    texts and errors from a trace, which must never be read as markup (an <img> tag would
    load a local file) or become links."""
    box = QMessageBox(icon, title, "", buttons, parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setText(text)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return box


def _message(parent: QWidget | None, icon, kind: str, title: str, text: str) -> None:
    _record(kind, title, text)
    if AUTO_ANSWER is not None:
        return
    # Window-modal and non-blocking: the app keeps drawing and the worker keeps running.
    box = message_box(parent, icon, title, text, QMessageBox.StandardButton.Ok)
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    box.setWindowModality(Qt.WindowModality.WindowModal)
    box.open()


def error(parent: QWidget | None, title: str, text: str) -> None:
    _message(parent, QMessageBox.Icon.Warning, "error", title, text)


def info(parent: QWidget | None, title: str, text: str) -> None:
    _message(parent, QMessageBox.Icon.Information, "info", title, text)


def save_path(parent: QWidget | None, title: str, start: str, filters: str) -> str | None:
    if AUTO_ANSWER is not None:
        return None
    path, _ = QFileDialog.getSaveFileName(parent, title, start, filters)
    return path or None


def open_path(parent: QWidget | None, title: str, start: str, filters: str) -> str | None:
    if AUTO_ANSWER is not None:
        return None
    path, _ = QFileDialog.getOpenFileName(parent, title, start, filters)
    return path or None
