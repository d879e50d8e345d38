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


def test_hover_tooltips_show_a_token_as_written(qtbot, monkeypatch):
    """The distribution panel's, the lab's and the plots' hover texts start with a token's
    repr: shown through tooltips.show_plain, as the characters themselves."""
    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QWidget

    from specviz.gui import tooltips

    shown = []
    monkeypatch.setattr(tooltips.QToolTip, "showText", lambda pos, text, w: shown.append(text))
    widget = QWidget()
    qtbot.addWidget(widget)
    tooltips.show_plain(QPoint(0, 0), f"{HOSTILE!r}: p = 0.5\nq = 0.25", widget)
    doc = QTextDocument()
    doc.setHtml(shown[0])
    assert doc.toPlainText() == f"{HOSTILE!r}: p = 0.5\nq = 0.25"  # no tag survives as a tag
    assert "<img" not in shown[0]


def test_no_view_hands_qtooltip_text_of_its_own():
    """Every QToolTip.showText in the window goes through tooltips.py (or the token view,
    which escapes its own HTML)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "specviz" / "gui"
    callers = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "showText":
                callers.add(path.relative_to(root).as_posix())
    assert callers == {"tooltips.py", "stream/token_view.py"}
