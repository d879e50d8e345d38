"""The window's tree wiring: a "Tree" tab beside the plots and the per-depth plot under them,
both only while the session drafts trees (a chain session's window is as it always was).

The tab sits in the plots' column so that the stream and the distribution panel stay in
view beside it: a click on a node of the chain view (the accepted path, the last rejected
child, the round's own token) selects that position there as a click in the stream does;
any other node is explained in the tab. The window calls show_position() whenever it selects
a position. GUI thread only.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QTabWidget

from specviz.core.metrics.position_bars import position_of, tokens_at
from specviz.core.trace.records import Round, SessionHeader
from specviz.gui.session.state import State
from specviz.gui.tree.depth_plot import DepthPlot
from specviz.gui.tree.model import RoundTree, round_tree
from specviz.gui.tree.panel import TreePanel

REFRESH_MS = 250  # while running, the per-depth plot is redrawn at most this often
PLOTS_TAB, TREE_TAB = 0, 1


class TreePresenter(QObject):
    """Owns the Tree tab and the per-depth plot of `window` (a MainWindow)."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.panel = TreePanel()
        self.depth = DepthPlot(window.plots)
        self.tabs: QTabWidget | None = None  # made when the first tree session starts
        self.active = False  # the session drafts trees: the tab and the plot are shown
        self._tree: RoundTree | None = None  # the selected round's (cached: a click redraws none)
        self._clicked: int | None = None  # the node a click selects through the window
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.depth.redraw)
        c = window.controller
        c.session_reset.connect(self._on_session_reset)
        c.rounds_added.connect(self._on_rounds_added)
        self.panel.view.node_clicked.connect(self._on_node_clicked)

    # ------------------------------------------------------------------------------ session

    def _on_session_reset(self, header: SessionHeader | None) -> None:
        self._timer.stop()
        self._tree = None
        self.depth.clear()
        self.panel.show_tree(None)
        tree = header is not None and header.settings is not None and header.settings.tree
        self.set_active(bool(tree))

    def _on_rounds_added(self, added: list) -> None:
        for rnd, _stats in added:
            if rnd.tree is not None:
                self.set_active(True)  # (a session whose settings changed to a tree)
                self.depth.add(rnd)
        if not self.active:
            return
        if self.window.controller.state in (State.RUNNING, State.REPLAYING):
            if not self._timer.isActive():
                self._timer.start()
        else:
            self._timer.stop()
            self.depth.redraw()

    def set_active(self, on: bool) -> None:
        """Show the Tree tab and the per-depth plot (a tree session) or neither."""
        if on == self.active:
            return
        self.active = on
        self.depth.set_shown(on)
        splitter = self.window.main_splitter
        plots = self.window.plots
        sizes = splitter.sizes()
        if on:
            if self.tabs is None:
                self.tabs = QTabWidget()
                self.tabs.setObjectName("plots-tabs")
                self.tabs.setDocumentMode(True)
            splitter.replaceWidget(1, self.tabs)
            self.tabs.addTab(plots, "Plots")
            self.tabs.addTab(self.panel, "Tree")
            self.tabs.setTabToolTip(TREE_TAB, "The selected round's token tree")
            self.tabs.setCurrentIndex(TREE_TAB)
        else:
            self.tabs.removeTab(TREE_TAB)
            self.tabs.removeTab(PLOTS_TAB)
            splitter.replaceWidget(1, plots)
            plots.show()
        splitter.setStretchFactor(1, 2)
        splitter.setSizes(sizes)

    # ------------------------------------------------------------------------------ selection

    def show_position(self, rnd: Round, position: int) -> None:
        """The window selected a position of a round: show its tree, that position's node
        selected (or the node a click chose)."""
        if not self.active:
            return
        if self._tree is None or self._tree.rnd is not rnd:
            self._tree = round_tree(rnd)
        tree = self._tree
        key = self._clicked
        if tree is not None and key is None:
            indices = tokens_at(rnd, position)  # drafted first, then the emitted token
            key = next((k for k in map(tree.node_at, indices) if k is not None), None)
        self.panel.show_tree(tree, key)

    def _on_node_clicked(self, round_index: int, key: int) -> None:
        tree = self.panel.view.tree
        if tree is None or key not in tree.chain:
            return  # the panel explains it; the other views keep their position
        self._clicked = key
        try:
            self.window.select_position(round_index, position_of(tree.rnd, tree.chain[key]))
        finally:
            self._clicked = None

    def show_tree_tab(self) -> None:
        if self.tabs is not None and self.active:
            self.tabs.setCurrentIndex(TREE_TAB)
