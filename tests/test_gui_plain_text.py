"""Strings from a trace or a model are shown as plain text, never as Qt rich text (an
<img> tag in a token would load a local file; issue 14)."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QMessageBox

from specviz.gui import dialogs
from specviz.gui.lab.editor import DistributionEditor
from specviz.gui.status_bar import StatusBar

HOSTILE = "<img src=x><b>x</b>"


def shown_as_text(label) -> bool:
    """What a QLabel displays is the string itself."""
    return label.textFormat() == Qt.TextFormat.PlainText and label.text().endswith(HOSTILE)


def test_status_bar_shows_model_names_as_written(qtbot):
    bar = StatusBar()
    qtbot.addWidget(bar)
    bar.set_pair(HOSTILE, HOSTILE)
    bar.set_busy(f"reading {HOSTILE}")
    assert shown_as_text(bar.pair) and shown_as_text(bar.device) and shown_as_text(bar.busy_label)


def test_lab_editor_rows_show_token_names_as_written(qtbot):
    editor = DistributionEditor()
    qtbot.addWidget(editor)
    editor.set_values(np.array([0.5, 0.5]), np.array([0.2, 0.8]), [HOSTILE, "b"])
    assert editor.labels[0] == HOSTILE
    label = editor.row_label(0)
    assert label.textFormat() == Qt.TextFormat.PlainText and label.text() == HOSTILE
    tip = editor.slider("p", 0).toolTip()
    doc = QTextDocument()
    doc.setHtml(tip)  # a tooltip is rich text: the name must come out as written
    assert HOSTILE in doc.toPlainText()


def test_message_boxes_are_plain_text(qtbot):
    box = dialogs.message_box(
        None, QMessageBox.Icon.Warning, "t", f"bad token {HOSTILE}", QMessageBox.StandardButton.Ok
    )
    qtbot.addWidget(box)
    assert box.textFormat() == Qt.TextFormat.PlainText and box.text().endswith(HOSTILE)
