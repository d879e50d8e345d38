"""The token tree of one round: the context on the left, depth to the right, each node its
token's text in its fate's colours (gui/palette.py), the accepted path's edges bold, the
round's own token after the last accepted node. Hover: a node's numbers (plain text); click:
node_clicked. Ctrl + wheel zooms, the wheel scrolls, a drag pans. GUI thread only.

Node, label and edge items are made once (MAX_NODES of each) and reused by every round, so
drawing a round moves and recolours items, never builds them.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPoint, QRectF, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontInfo,
    QFontMetricsF,
    QPainter,
    QPen,
    QTransform,
)
from PySide6.QtWidgets import (
    QApplication,
    QGraphicsLineItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
    QGraphicsView,
    QWidget,
)

from specviz.core.trace.records import MAX_TREE_BUDGET
from specviz.gui import palette
from specviz.gui.tooltips import show_plain
from specviz.gui.tree.layout import ROOT, layout
from specviz.gui.tree.model import CONTEXT, RoundTree
from specviz.gui.tree.text import CONTEXT_LABEL, node_label, tooltip

MAX_NODES = MAX_TREE_BUDGET + 2  # the drafted nodes, the context and the round's own token
FONT_PT = 9.0  # the nodes' text at zoom 1
PAD = 2.0  # between a node's text and its box
ROW_GAP = 2.0  # between two rows of boxes
COLUMN_GAP = 16.0  # between two columns of boxes: where the edges run
MARGIN = 6.0  # around the tree in the scene
# A tree is scaled to fit its view: shrunk while its labels stay MIN_LABEL_PX or more (a
# larger tree then pans), grown up to MAX_FIT (a small tree fills its view, not a corner).
MIN_LABEL_PX = 9.0
MAX_FIT = 2.0
PATH_WIDTH = 3.0  # the accepted path's edges (and the edge to the round's own token)
EDGE_WIDTH = 1.0  # every other edge
FIT_KEY = Qt.Key.Key_F  # back to the fit (no window action takes F)
KEY = 0  # the item data slot holding a node's key
CLICK_SLOP = 4  # a press and release this close (px) is a click, farther a drag


def _colours(fate: str) -> tuple[str, str, bool]:
    """(text and border, fill, struck) of a node's fate."""
    if fate == CONTEXT:
        return palette.PROMPT, palette.PROMPT_BACKGROUND, False
    f = palette.fate(fate)
    return f.foreground, f.background, f.struck


class TreeView(QGraphicsView):
    """One round's tree; show(tree) draws it, select(key) outlines a node.

    node_clicked(round_index, key) is emitted on a click (GUI thread)."""

    node_clicked = Signal(int, int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self.scene().setItemIndexMethod(QGraphicsScene.ItemIndexMethod.NoIndex)
        self.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.setBackgroundBrush(QBrush(QColor("white")))
        self.setMouseTracking(True)
        base = QApplication.font()
        self._font = QFont(base)
        self._font.setPointSizeF(FONT_PT)
        self._struck = QFont(self._font)
        self._struck.setStrikeOut(True)
        self._metrics = QFontMetricsF(self._font)
        # the least scale at which a label's text is MIN_LABEL_PX high (its font's pixel size)
        self.min_fit = min(1.0, MIN_LABEL_PX / max(QFontInfo(self._font).pixelSize(), 1))
        self.tree: RoundTree | None = None
        self.zoom = 1.0  # the user's (Ctrl + wheel), times the fit
        self._fit = 1.0
        self._press: QPoint | None = None
        self._highlight = QGraphicsRectItem()
        self._highlight.setPen(QPen(Qt.PenStyle.NoPen))
        self._highlight.setBrush(QBrush(QColor(palette.SELECTED)))
        self._highlight.setZValue(-1)
        self._highlight.setVisible(False)
        self.scene().addItem(self._highlight)
        self._boxes: list[QGraphicsRectItem] = []
        self._labels: list[QGraphicsSimpleTextItem] = []
        self._edges: list[QGraphicsLineItem] = []
        for _ in range(MAX_NODES):
            edge = QGraphicsLineItem()
            edge.setZValue(0)
            box = QGraphicsRectItem()
            box.setZValue(1)
            label = QGraphicsSimpleTextItem(box)
            label.setFont(self._font)
            for item in (edge, box):
                item.setVisible(False)
                self.scene().addItem(item)
            self._edges.append(edge)
            self._boxes.append(box)
            self._labels.append(label)
        self._slot: dict[int, int] = {}  # node key -> its items' index
        self.selected: int | None = None

    # ------------------------------------------------------------------------------ model

    def draw(self, tree: RoundTree | None, selected: int | None = None) -> None:
        """Draw a round's tree (None: nothing), `selected` outlined."""
        self.tree = tree
        keys = [] if tree is None else sorted(tree.nodes)  # ROOT first
        self._slot = {key: i for i, key in enumerate(keys)}
        box_w, box_h = self._box_size(tree)
        column, row_h = box_w + COLUMN_GAP, box_h + ROW_GAP
        places = layout(tree.parents) if tree is not None else {}
        own = tree.final if tree is not None else None
        emitted = set() if tree is None else {*tree.path, own}
        rects: dict[int, QRectF] = {}
        for key in keys:
            i = self._slot[key]
            node = tree.nodes[key]
            depth, row = places[key]  # the layout's node i is key i (ROOT: the root)
            rect = QRectF(MARGIN + depth * column, MARGIN + row * row_h, box_w, box_h)
            rects[key] = rect
            fore, back, struck = _colours(node.fate)
            box, label = self._boxes[i], self._labels[i]
            box.setRect(rect)
            box.setPen(QPen(QColor(fore), 1.0))
            box.setBrush(QBrush(QColor(back)))
            box.setData(KEY, key)
            label.setText(CONTEXT_LABEL if key == ROOT else node_label(node.text))
            label.setBrush(QBrush(QColor(fore)))
            label.setFont(self._struck if struck else self._font)
            width = label.boundingRect().width()
            label.setPos(rect.x() + (box_w - width) / 2, rect.y() + PAD / 2)
            box.setVisible(True)
        for key in keys:
            edge = self._edges[self._slot[key]]
            node = tree.nodes[key]
            if node.parent is None:
                edge.setVisible(False)
                continue
            start, end = rects[node.parent], rects[key]
            edge.setLine(start.right(), start.center().y(), end.left(), end.center().y())
            on_path = key in emitted
            colour = _colours(node.fate)[0] if on_path or node.fate != "discarded" else None
            pen = QPen(QColor(colour or palette.BOUNDARY), PATH_WIDTH if on_path else EDGE_WIDTH)
            if node.fate == "discarded":
                pen.setStyle(Qt.PenStyle.DotLine)
            edge.setPen(pen)
            edge.setVisible(True)
        for i in range(len(keys), MAX_NODES):
            self._boxes[i].setVisible(False)
            self._edges[i].setVisible(False)
        bounds = QRectF()
        for rect in rects.values():
            bounds = bounds.united(rect)
        self.scene().setSceneRect(bounds.adjusted(-MARGIN, -MARGIN, MARGIN, MARGIN))
        self.select(selected)
        self.refit()

    def _box_size(self, tree: RoundTree | None) -> tuple[float, float]:
        """Every box one size: the widest label a node may show, the line's height."""
        labels = [CONTEXT_LABEL]
        if tree is not None:  # as wide as the round's widest label (at most NODE_CHARS)
            labels += [node_label(n.text) for k, n in tree.nodes.items() if k != ROOT]
        widest = max(self._metrics.horizontalAdvance(text) for text in labels)
        return widest + 2 * PAD, self._metrics.height() + PAD

    def select(self, key: int | None) -> None:
        """Outline a node (None: none)."""
        if key is not None and key not in self._slot:
            key = None
        self.selected = key
        self._highlight.setVisible(key is not None)
        if key is not None:
            rect = self._boxes[self._slot[key]].rect()
            self._highlight.setRect(rect.adjusted(-3, -3, 3, 3))
            self.ensureVisible(rect, 8, 8)

    # ------------------------------------------------------------------------------ zoom

    def refit(self) -> None:
        """Scale the tree to its view (labels no smaller than MIN_LABEL_PX, no larger than
        MAX_FIT times their size), times the user's zoom (F: back to the fit)."""
        rect = self.sceneRect()
        room = self.viewport().size()
        if rect.width() > 0 and rect.height() > 0 and room.width() > 0:
            fit = min(room.width() / rect.width(), room.height() / rect.height(), MAX_FIT)
            self._fit = max(fit, self.min_fit)
        self.setTransform(QTransform.fromScale(self.scale_now, self.scale_now))

    @property
    def scale_now(self) -> float:
        return self._fit * self.zoom

    def set_zoom(self, zoom: float) -> None:
        self.zoom = min(max(zoom, 0.25), 4.0)
        self.refit()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.refit()

    def wheelEvent(self, event) -> None:
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            steps = event.angleDelta().y() / 120
            self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
            self.set_zoom(self.zoom * 1.15**steps)
            self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
            event.accept()
            return
        super().wheelEvent(event)

    def fit(self) -> None:
        """Back to the fit: the user's zoom undone (F, the Tree tab's Fit button)."""
        self.set_zoom(1.0)

    def keyPressEvent(self, event) -> None:
        # F fits: in the window, Ctrl+0 and Ctrl +/- are View's text size (they never get here)
        if event.key() == FIT_KEY and not event.modifiers():
            self.fit()
            return
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier and event.key() in (
            Qt.Key.Key_Plus, Qt.Key.Key_Equal, Qt.Key.Key_Minus,
        ):  # fmt: skip
            self.set_zoom(self.zoom * (1 / 1.15 if event.key() == Qt.Key.Key_Minus else 1.15))
            return
        super().keyPressEvent(event)

    # ------------------------------------------------------------------------------ queries

    def box(self, key: int) -> QGraphicsRectItem:
        """The box drawn for a node (tests, the benchmark)."""
        return self._boxes[self._slot[key]]

    def label(self, key: int) -> QGraphicsSimpleTextItem:
        return self._labels[self._slot[key]]

    def edge(self, key: int) -> QGraphicsLineItem:
        """The edge into a node from its parent."""
        return self._edges[self._slot[key]]

    def key_at(self, point: QPoint) -> int | None:
        """The node under a point of the viewport."""
        for item in self.items(point):
            while item is not None:
                key = item.data(KEY)
                if key is not None and item.isVisible():
                    return int(key)
                item = item.parentItem()
        return None

    def tooltip_at(self, key: int) -> str:
        return tooltip(self.tree, key) if self.tree is not None else ""

    # ------------------------------------------------------------------------------ events

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            key = self.key_at(event.pos())
            show_plain(event.globalPos(), "" if key is None else self.tooltip_at(key),
                       self.viewport())  # fmt: skip
            return True
        return super().viewportEvent(event)

    def mousePressEvent(self, event) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self._press = event.position().toPoint()
        super().mousePressEvent(event)

    def mouseReleaseEvent(self, event) -> None:
        super().mouseReleaseEvent(event)
        press, self._press = self._press, None
        point = event.position().toPoint()
        if event.button() != Qt.MouseButton.LeftButton or press is None:
            return
        if (point - press).manhattanLength() > CLICK_SLOP:
            return  # a drag: it panned
        key = self.key_at(point)
        if key is not None:
            self.click(key)

    def click(self, key: int) -> None:
        """What a click on a node does: outline it and say so."""
        if self.tree is None or key not in self._slot:
            return
        self.select(key)
        self.node_clicked.emit(self.tree.rnd.index, key)
