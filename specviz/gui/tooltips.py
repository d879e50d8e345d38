"""Tooltips of text that is not ours (a token, a trace's label): always shown as plain text.

QToolTip guesses whether a string is rich text (Qt::mightBeRichText) and renders it as HTML
if it looks so: a token `<img src=...>` would load a local image. The text is escaped and
set as HTML that shows it character for character, line breaks kept. GUI thread only.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QToolTip, QWidget


def plain_html(text: str) -> str:
    """Rich text that displays `text` exactly (escaped; white space and line breaks kept)."""
    return f"<p style='white-space:pre-wrap'>{html.escape(text, quote=False)}</p>"


def show_plain(pos: QPoint, text: str, widget: QWidget) -> None:
    """QToolTip.showText for text that may hold anything; empty text hides the tooltip."""
    if text:
        QToolTip.showText(pos, plain_html(text), widget)
    else:
        QToolTip.hideText()
