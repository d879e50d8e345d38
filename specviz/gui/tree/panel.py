"""The Tree tab: the selected round's tree above, the explanation of its selected node below
(plain text: it quotes a model's tokens). A tree handed over while the tab is hidden is drawn
when it shows. GUI thread only.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from specviz.gui.tree.model import RoundTree
from specviz.gui.tree.text import explanation, round_line
from specviz.gui.tree.view import TreeView

HINT = (
    "hover: numbers \u00b7 click: explain \u00b7 Ctrl+wheel: zoom \u00b7 F or Fit: fit \u00b7 "
    "drag: pan"
)
NO_TREE = "No tree round selected: Step a session with a tree width above 1."
EXPLANATION_LINES = 7  # the explanation's starting height


class TreePanel(QWidget):
    """TreeView and its explanation."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.view = TreeView()
        self.view.node_clicked.connect(lambda _round, key: self.explain(key))
        self.explanation = QPlainTextEdit()
        self.explanation.setReadOnly(True)
        self.explanation.setObjectName("tree-explanation")
        self.explanation.setPlaceholderText(NO_TREE)
        self.hint = hint = QLabel(HINT)
        hint.setTextFormat(Qt.TextFormat.PlainText)
        hint.setStyleSheet("color: #666666;")
        hint.setWordWrap(True)  # never widens the plots' column
        self.fit_button = QToolButton()
        self.fit_button.setText("Fit")
        self.fit_button.setToolTip("Scale the tree to the view again (F)")
        self.fit_button.clicked.connect(self.view.fit)
        top = QHBoxLayout()
        top.addWidget(hint, 1)
        top.addWidget(self.fit_button)
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.addWidget(self.view)
        self.splitter.addWidget(self.explanation)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setStretchFactor(0, 1)
        line = self.explanation.fontMetrics().lineSpacing()
        self.splitter.setSizes([600, EXPLANATION_LINES * line + 10])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(2)
        layout.addLayout(top)
        layout.addWidget(self.splitter, 1)
        self._pending: tuple[RoundTree | None, int | None] | None = None

    @property
    def tree(self) -> RoundTree | None:
        if self._pending is not None:
            return self._pending[0]
        return self.view.tree

    def show_tree(self, tree: RoundTree | None, key: int | None = None) -> None:
        """Show a round's tree with `key` selected (drawn now if the tab is shown)."""
        if not self.isVisible():
            self._pending = (tree, key)
            return
        self._pending = None
        if tree is not self.view.tree:
            self.view.draw(tree, key)
        self.explain(key)

    def explain(self, key: int | None) -> None:
        """Select a node of the shown tree and say what happened to it."""
        tree = self.view.tree
        if tree is None:
            self.explanation.setPlainText("")
            return
        self.view.select(key)
        text = round_line(tree)
        if key is not None and key in tree.nodes:
            text += "\n" + explanation(tree, key)
        else:
            text += "\nClick a node to see what happened to it."
        if self.explanation.toPlainText() != text:
            self.explanation.setPlainText(text)
            self._fit_explanation()

    def _fit_explanation(self) -> None:
        """As tall as its text (whole, not cut mid-line), up to half the panel."""
        box = self.explanation
        total = sum(self.splitter.sizes())
        if total <= 0 or box.viewport().width() <= 0:
            return
        lines = 0
        block = box.document().firstBlock()
        while block.isValid():
            lines += max(block.layout().lineCount(), 1)
            block = block.next()
        frame = box.height() - box.viewport().height()
        margins = box.document().documentMargin() * 2
        want = int(lines * box.fontMetrics().lineSpacing() + margins + frame + 2)
        for _ in range(4):  # a wrapped line the estimate missed shows as a scroll range
            want = min(want, total // 2)
            self.splitter.setSizes([total - want, want])
            extra = box.verticalScrollBar().maximum()  # in lines, for a QPlainTextEdit
            if not extra or want >= total // 2:
                break
            want += extra * box.fontMetrics().lineSpacing()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._pending is not None:
            self.show_tree(*self._pending)
