"""The losslessness lab window: edit p and q (or take them from a real position), see the
seeds' arithmetic, and run the rule N times to watch the emitted tokens follow p.

Every number shown comes from specviz.core.lab.montecarlo; this module only lays them out.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

import numpy as np
from PySide6.QtCore import QMetaMethod, Qt, Signal
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QGroupBox,
    QLabel,
    QMainWindow,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from specviz.core.lab.arithmetic import Arithmetic, arithmetic
from specviz.core.lab.distributions import BarLayout, bar_layout, normalise
from specviz.core.lab.position import PositionDistributions
from specviz.gui.lab.arithmetic_table import ArithmeticTable
from specviz.gui.lab.bar_plots import POSITION_SERIES, WARPED_SERIES, GroupedBars, show_token
from specviz.gui.lab.editor import MAX_TOKENS, MIN_TOKENS, DistributionEditor
from specviz.gui.lab.montecarlo_panel import MonteCarloPanel
from specviz.gui.lab.sequence_panel import SequencePanel
from specviz.gui.screen_fit import fit_to_screen

INTRO = (
    "The draft proposes x ~ q; the target keeps it when u &lt; min(1, p(x)/q(x)); after a "
    "rejection one token is drawn from norm(max(0, p − q)). The emitted token then follows "
    "p exactly: the acceptance path gives min(p, q), the rejection path the rest."
)
GUIDE = (
    "1. Drag q(A) from 0.2 towards p(A) = 0.5: α rises and the residual shrinks.<br>"
    "2. Press <b>Run</b> with N = 100,000: the green bars land on the blue p, not on the "
    "purple q, and the χ² test finds nothing.<br>"
    "3. Switch the rule to a <b>WRONG</b> one and run again: the bars miss p and the "
    "p-value collapses.<br>"
    "4. Make q equal to p: α = 1 and no draft is ever rejected."
)
# The guide's other two tabs (a tab each, so that each fits the lab at 1280 x 720)
WHY = (
    "<b>Why it works.</b> A token x is emitted on one of two paths. Accepted: the draft "
    "proposes x (probability q(x)) and passes (min(1, p(x)/q(x))), together min(p(x), q(x)). "
    "Rejected: a rejection happens (1 − α) and the residual picks x "
    "(max(0, p(x) − q(x)) / (1 − α)), together max(0, p(x) − q(x)). "
    "min(a, b) + max(0, a − b) = a, so the two paths add up to p(x) for every x: the draft "
    "changes only how often drafts are accepted, never what comes out."
)
WRONG_RULES = (
    "<b>The wrong rules.</b> Rejecting whenever p(x) &lt; q(x) throws away mass that the "
    "acceptance path should have accepted; resampling from p after a rejection counts the "
    "overlap min(p, q) twice. Both emit a distribution that is not p."
)
GUIDE_FIXED = GUIDE.replace(
    "1. Drag q(A) from 0.2 towards p(A) = 0.5: α rises and the residual shrinks.<br>",
    "1. These p and q come from a position and cannot be dragged here (“Back to the "
    "seeds' example” has the sliders).<br>",
)
STORED = (
    "{title}: a trace keeps the top-N of the warped p and q only, so there is nothing raw "
    "to compare with. On a live session, “Use the selected position” computes both."
)
SEED_TITLE = "teaching example (the seeds' four tokens to start with; edit p and q freely)"
WARPED_EMPTY = (
    "No position yet. Select a token in the main window and choose “Use the selected "
    "position”, or start the lab on a model pair: <tt>specviz lab --gui --prompt …</tt>"
)


class LabWindow(QMainWindow):
    """The lab, standalone or opened by the main window. GUI thread only.

    request_position is emitted when the user asks for the main window's selected
    position; the main window answers with set_position().
    """

    request_position = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("specviz — losslessness lab")
        fit_to_screen(self, 1500, 940)
        self.p = self.q = np.ones(1)
        self.title = SEED_TITLE
        self.arith: Arithmetic | None = None
        self.layout_: BarLayout | None = None
        self.position: PositionDistributions | None = None
        self._labels: Sequence[str] | Callable[[int], str] = ()

        self.heading = QLabel()
        self.heading.setTextFormat(Qt.TextFormat.RichText)
        self.heading.setWordWrap(True)
        self.editor = DistributionEditor()
        self.editor_note = QLabel()
        self.editor_note.setWordWrap(True)
        self.editor_note.hide()
        self.back_button = QPushButton("Back to the seeds' example")
        self.back_button.hide()
        edit_box = _group("p and q — drag a slider or type; each distribution renormalises")
        for w in (self.editor, self.editor_note, self.back_button):
            edit_box.layout().addWidget(w)
        self.table = ArithmeticTable()
        table_box = _group("The seeds' arithmetic, token by token")
        table_box.layout().addWidget(self.table)

        self.alpha_label = QLabel()
        self.alpha_label.setTextFormat(Qt.TextFormat.RichText)
        self.position_bars = GroupedBars(POSITION_SERIES)
        self.warped_caption = QLabel(WARPED_EMPTY)
        self.warped_caption.setWordWrap(True)
        self.warped_caption.setTextFormat(Qt.TextFormat.RichText)
        self.warped_bars = GroupedBars(WARPED_SERIES)
        self.position_button = QPushButton("Use the selected position")
        self.tabs = QTabWidget()
        self.tabs.addTab(_page(self.alpha_label, self.position_bars), "p, q, min, max(0, p − q)")
        self.tabs.addTab(_page(self.warped_caption, self.warped_bars), "warped vs raw")
        bars_box = _group("This position")
        bars_box.layout().addWidget(self.tabs)
        # under the tabs, so that it shows whichever tab is open
        bars_box.layout().addWidget(self.position_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.monte_carlo = MonteCarloPanel()

        self.guide = _guide_label(GUIDE)
        self.guide_tabs = QTabWidget()
        for label, text in ((self.guide, "Try this"), (_guide_label(WHY), "Why it works"),
                            (_guide_label(WRONG_RULES), "The wrong rules")):  # fmt: skip
            scroll = QScrollArea()  # scrolls on a small screen rather than being cut
            scroll.setWidget(label)
            scroll.setWidgetResizable(True)
            scroll.setFrameShape(QFrame.Shape.NoFrame)
            self.guide_tabs.addTab(scroll, text)
        guide_box = QWidget()
        QVBoxLayout(guide_box).addWidget(self.guide_tabs)
        guide_box.layout().setContentsMargins(0, 0, 0, 0)
        left = QWidget()
        column = QVBoxLayout(left)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(edit_box)
        column.addWidget(table_box)  # as tall as its rows, up to a cap (ArithmeticTable)
        column.addWidget(guide_box, 1)
        self.sequences = SequencePanel()
        self.sequences.example_requested.connect(self.set_distributions)
        self.runs = QTabWidget()
        self.runs.addTab(self.monte_carlo, "One position: N draws")
        self.runs.addTab(self.sequences, "Sequences: K drafts, every rule")
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(bars_box)
        right.addWidget(self.runs)
        right.setSizes([330, 610])  # the runs' tables take the height they need
        body = QSplitter(Qt.Orientation.Horizontal)
        body.addWidget(left)
        body.addWidget(right)
        body.setSizes([640, 860])
        body.setStretchFactor(0, 2)
        body.setStretchFactor(1, 3)
        body.setChildrenCollapsible(False)
        left.setMinimumWidth(440)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.addWidget(self.heading)
        layout.addWidget(body, 1)
        self.setCentralWidget(central)

        self.editor.changed.connect(self._from_editor)
        self.editor.refused.connect(lambda m: self.statusBar().showMessage(f"refused: {m}", 6000))
        self.back_button.clicked.connect(self._back_to_editor)
        self.position_button.clicked.connect(self._ask_position)
        app = QApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.monte_carlo.shutdown)
            app.aboutToQuit.connect(self.sequences.shutdown)
        self._from_editor()

    # ------------------------------------------------------------------------------ API

    def set_distributions(
        self,
        p: np.ndarray,
        q: np.ndarray,
        labels: Sequence[str] | Callable[[int], str] | None = None,
        title: str | None = None,
    ) -> None:
        """Show p and q over any vocabulary. Up to MAX_TOKENS entries with list labels are
        editable; longer ones show the top 20 + everything else, and Monte Carlo runs on
        the full distributions. ValueError (negative, all-zero, lengths differ) changes
        nothing."""
        pn, qn = normalise(p), normalise(q)
        if pn.size != qn.size:
            raise ValueError(f"p and q must have the same length ({pn.size} vs {qn.size})")
        self.title = title or "custom distributions"
        if MIN_TOKENS <= pn.size <= MAX_TOKENS and not callable(labels):
            self.editor.set_values(pn, qn, labels)  # emits changed -> _from_editor
            self._editable(True)
            return
        self._editable(False)
        self.editor_note.setText(
            f"p and q over {pn.size:,} tokens come from {self.title}: not editable here. "
            "The bars show the 20 likeliest tokens and everything else; Monte Carlo runs on "
            "the whole vocabulary."
        )
        self._show(pn, qn, labels if labels is not None else (lambda i: f"#{i}"))

    def set_position(self, position: PositionDistributions, title: str | None = None) -> None:
        """A real position: the warped p and q for the lab, raw and warped side by side."""
        self.position = position
        self.set_distributions(position.p, position.q, position.label, title or "a position")
        layout = position.layout()
        self.warped_bars.set_values(
            layout.labels,
            [layout.apply(v) for v in (position.p_raw, position.p, position.q_raw, position.q)],
        )
        s = position.settings
        cuts = [f"top-k {s.top_k}" if s.top_k else "", f"top-p {s.top_p:g}" if s.top_p < 1 else ""]
        cut = ", ".join(c for c in cuts if c) or "no top-k / top-p cut"
        self.warped_caption.setText(
            f"{html.escape(self.title)}: temperature {s.temperature:g}, {cut}. "
            f"<b>The rule must use the warped p and q</b>: the draft samples from warped q, and "
            f"the output must follow warped p. α warped = <b>{position.alpha:.4f}</b>, "
            f"α raw = {position.alpha_raw:.4f} (for contrast only)."
        )

    # ------------------------------------------------------------------------------ internals

    def _from_editor(self) -> None:
        self._show(self.editor.p, self.editor.q, self.editor.labels)

    def _show(self, p, q, labels) -> None:
        self.p, self.q, self._labels = p, q, labels
        self.arith = arithmetic(p, q)
        self.layout_ = bar_layout(np.maximum(self.arith.p, self.arith.q), labels)
        a, lay = self.arith, self.layout_
        self.position_bars.set_values(
            lay.labels, [lay.apply(v) for v in (a.p, a.q, a.overlap, a.excess, a.residual)]
        )
        shown = [
            f"{html.escape(show_token(label))} {value:.3f}"
            for label, value in zip(lay.labels, lay.apply(a.residual), strict=True)
            if value >= 0.0005
        ]
        residual = ", ".join(shown[:5]) + (", …" if len(shown) > 5 else "")
        self.alpha_label.setText(
            f"α = Σ min(p, q) = <b>{a.alpha:.4f}</b> &nbsp; 1 − α = <b>{a.reject:.4f}</b>"
            f" &nbsp; residual norm(max(0, p − q)): {residual or '—'}"
        )
        self.table.show_arithmetic(a, lay)
        self.heading.setText(f"<b>Losslessness lab</b> — {html.escape(self.title)}.<br>{INTRO}")
        self.monte_carlo.set_distributions(a.p, a.q, lay)
        self.sequences.set_distributions(a.p, a.q, labels)

    def set_stored_position(self, p, q, labels: Sequence[str], title: str) -> None:
        """A replayed position: its stored (warped) top-N; there are no raw distributions."""
        self.position = None
        self.set_distributions(p, q, labels, title)
        self.warped_bars.set_values((), [None] * len(WARPED_SERIES))
        self.warped_caption.setText(html.escape(STORED.format(title=title)))

    def _editable(self, editable: bool) -> None:
        self.guide.setText(GUIDE if editable else GUIDE_FIXED)
        self.editor.setVisible(editable)
        self.editor_note.setVisible(not editable)
        self.back_button.setVisible(not editable)

    def _back_to_editor(self) -> None:
        self.title = SEED_TITLE
        self._editable(True)
        self.editor.reset()

    def _ask_position(self) -> None:
        signal = QMetaMethod.fromSignal(self.request_position)
        if not self.isSignalConnected(signal):
            self.statusBar().showMessage(
                "no main window here: open the lab from one, or run "
                "`specviz lab --gui --prompt ...`",
                8000,
            )
            return
        self.request_position.emit()

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        self.monte_carlo.shutdown()
        self.sequences.shutdown()
        super().closeEvent(event)


def _guide_label(text: str) -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setAlignment(Qt.AlignmentFlag.AlignTop)
    return label


def _group(title: str) -> QGroupBox:
    box = QGroupBox(title)
    QVBoxLayout(box)
    return box


def _page(*widgets: QWidget) -> QWidget:
    page = QWidget()
    layout = QVBoxLayout(page)
    for w in widgets:
        if isinstance(w, QPushButton):
            layout.addWidget(w, 0, Qt.AlignmentFlag.AlignLeft)
        else:
            layout.addWidget(w, 1 if isinstance(w, GroupedBars) else 0)
    return page
