"""The Drafting box of the controls: who proposes the K tokens (the draft model, prompt
lookup, the target's first layers), how K is chosen each round, and whether they form a
chain or a token tree. GUI thread only.

It holds values: `drafting()` is the (DrafterConfig, PolicyConfig) pair the next session
starts with; `changed` says the user chose another. `tree_settings()` are the Settings'
tree fields (applied from the next round, as K); `tree_edited` says the user changed one,
`tree_shown` whether the rounds now draft a tree (also when set without emitting).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QSpinBox,
    QWidget,
)

from specviz.core.decoding.k_policy import POLICIES, PolicyConfig
from specviz.core.drafters.registry import SPECS, DrafterConfig, all_params, spec
from specviz.core.drafters.spec import TEXT_MAX
from specviz.core.trace.records import MAX_TREE_BUDGET, MAX_TREE_WIDTH, Settings

POLICY_LABELS = {
    "constant": "constant K",
    "heuristic": "heuristic (+2 / -1)",
    "threshold": "confidence threshold",
}
TREE_DRAW_LABELS = {"sample": "from q (SpecInfer)", "topk": "q's top W (EAGLE)"}
TREE_SHAPE_LABELS = {"full": "full", "dynamic": "dynamic (EAGLE-2)"}
WIDTH_TIP = (
    "Children per drafted node: 1 drafts a chain; 2-8 a token tree of depth K, verified "
    "in one target pass (draft model only)"
)


def describe_drafter(drafter: DrafterConfig) -> str:
    """What drafts, in words (the Models box and the status bar)."""
    return drafter.spec.words(drafter.values())


class DraftingBox(QGroupBox):
    changed = Signal(object, object)  # DrafterConfig, PolicyConfig
    tree_edited = Signal()  # the user changed a tree setting
    tree_shown = Signal(bool)  # the rounds draft a tree (width > 1, a drafter that can)

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Drafting", parent)
        p = PolicyConfig()
        self.drafter_combo = QComboBox()
        for entry in SPECS.values():
            self.drafter_combo.addItem(entry.label, entry.kind)
            self.drafter_combo.setItemData(
                self.drafter_combo.count() - 1,
                entry.tip,
                3,  # ToolTipRole
            )
        self.drafter_combo.setToolTip("Who proposes the K tokens of a round")
        self.drafter_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.drafter_combo.setMinimumContentsLength(12)
        # A spin box per drafter parameter (the registry's); enabled for the drafters
        # that take it. A parameter that may be None shows its meaning at the low end.
        # A text parameter (eagle3's head: a folder or hub id) is a line edit, read when
        # editing finishes; empty means its none_label (the pair's own).
        self.param_spins: dict[str, QSpinBox | QDoubleSpinBox | QLineEdit] = {}
        for param in all_params():
            if param.text:
                edit = QLineEdit("" if param.default is None else str(param.default))
                edit.setPlaceholderText(param.none_label or "")
                edit.setMaxLength(TEXT_MAX)
                edit.setToolTip(param.help)
                edit.setMinimumWidth(120)
                self.param_spins[param.name] = edit
                continue
            spin = QDoubleSpinBox() if param.decimals else QSpinBox()
            if param.decimals:
                spin.setDecimals(param.decimals)
                spin.setSingleStep(10.0**-param.decimals * 5)
            if param.none_label is not None:
                spin.setRange(param.low - 1, param.high)
                spin.setSpecialValueText(param.none_label)
            else:
                spin.setRange(param.low, param.high)
            spin.setValue(param.low - 1 if param.default is None else param.default)
            spin.setToolTip(param.help)
            self.param_spins[param.name] = spin
        self.policy_combo = QComboBox()
        for kind in POLICIES:
            self.policy_combo.addItem(POLICY_LABELS.get(kind, kind), kind)
        self.policy_combo.setToolTip(
            "How K is chosen each round: K every round; transformers' heuristic (+2 after a "
            "fully accepted round, -1 otherwise); or up to K, stopping after a draft the "
            "drafter gives less than the threshold"
        )
        self.policy_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.policy_combo.setMinimumContentsLength(12)
        self.threshold_spin = QDoubleSpinBox()
        self.threshold_spin.setRange(0.0, 1.0)
        self.threshold_spin.setSingleStep(0.05)
        self.threshold_spin.setDecimals(2)
        self.threshold_spin.setValue(p.threshold)
        self.threshold_spin.setToolTip("threshold policy: assistant_confidence_threshold")
        self._tree_controls()
        note = QLabel(
            "The drafter and the policy start a new session; the tree settings apply from "
            "the next round."
        )
        note.setWordWrap(True)
        note.setStyleSheet("color: #666;")
        form = QFormLayout(self)
        form.addRow("Drafter", self.drafter_combo)
        for param in all_params():
            form.addRow(param.label, self.param_spins[param.name])
        form.addRow("K policy", self.policy_combo)
        form.addRow("Threshold", self.threshold_spin)
        form.addRow("Tree width", self.tree_width_spin)
        form.addRow("Tree budget", self.tree_budget_spin)
        form.addRow("Tree children", self.tree_draw_combo)
        form.addRow("Tree shape", self.tree_shape_combo)
        form.addRow(self.tree_note)
        form.addRow(note)
        for combo in (self.drafter_combo, self.policy_combo):
            combo.currentIndexChanged.connect(self._changed)
        for spin in (*self.param_spins.values(), self.threshold_spin):
            if isinstance(spin, QLineEdit):
                spin.editingFinished.connect(self._text_edited)
            else:
                spin.valueChanged.connect(self._changed)
        for spin in (self.tree_width_spin, self.tree_budget_spin):
            spin.valueChanged.connect(self._tree_edited)
        for combo in (self.tree_draw_combo, self.tree_shape_combo):
            combo.currentIndexChanged.connect(self._tree_edited)
        self._texts = {n: w.text() for n, w in self.param_spins.items()
                       if isinstance(w, QLineEdit)}  # fmt: skip
        self._enable()

    # ------------------------------------------------------------------------------ tree

    def _tree_controls(self) -> None:
        d = Settings()
        self.tree_width_spin = QSpinBox()
        self.tree_width_spin.setRange(1, MAX_TREE_WIDTH)
        self.tree_width_spin.setSpecialValueText("1 (a chain)")
        self.tree_width_spin.setValue(d.tree_width)
        self.tree_width_spin.setToolTip(WIDTH_TIP)
        # The width asked for while a chain-only drafter holds the spin at 1.
        self._width_kept = d.tree_width
        self.tree_budget_spin = QSpinBox()
        self.tree_budget_spin.setRange(1, MAX_TREE_BUDGET)
        self.tree_budget_spin.setValue(d.tree_budget)
        self.tree_budget_spin.setToolTip("Drafted nodes in one round's tree, at most")
        self.tree_draw_combo = _combo(TREE_DRAW_LABELS, d.tree_draw)
        self.tree_draw_combo.setToolTip(
            "A node's W children: W draws from q (SpecInfer), or q's W likeliest (EAGLE)"
        )
        self.tree_shape_combo = _combo(TREE_SHAPE_LABELS, d.tree_shape)
        self.tree_shape_combo.setToolTip(
            "full: every node gets children, breadth first, to the budget; dynamic: only "
            "the W likeliest nodes of a level (EAGLE-2)"
        )
        self.tree_note = QLabel()  # why the width is held, or what a tree holds
        self.tree_note.setWordWrap(True)
        self.tree_note.setTextFormat(Qt.TextFormat.PlainText)
        self.tree_note.setStyleSheet("color: #666;")

    def _tree_widgets(self) -> tuple:
        return (self.tree_width_spin, self.tree_budget_spin, self.tree_draw_combo,
                self.tree_shape_combo)  # fmt: skip

    @property
    def drafts_trees(self) -> bool:
        """The drafter chosen can draft a token tree."""
        kind = self.drafter_combo.currentData()
        return kind is not None and spec(kind).drafts_trees  # the registry's DrafterSpec

    def tree_settings(self) -> dict:
        """The tree fields of Settings (TREE_SETTINGS) as shown (a chain-only drafter
        holds the width at 1: _enable_tree)."""
        return {
            "tree_width": self.tree_width_spin.value(),
            "tree_budget": self.tree_budget_spin.value(),
            "tree_draw": self.tree_draw_combo.currentData(),
            "tree_shape": self.tree_shape_combo.currentData(),
        }

    def set_tree(self, settings: Settings) -> None:
        """Show a session's tree settings without emitting `tree_edited`."""
        for w in self._tree_widgets():
            w.blockSignals(True)
        self._width_kept = settings.tree_width
        if self.tree_width_spin.isEnabled():
            self.tree_width_spin.setValue(settings.tree_width)
        self.tree_budget_spin.setValue(settings.tree_budget)
        for combo, value in ((self.tree_draw_combo, settings.tree_draw),
                             (self.tree_shape_combo, settings.tree_shape)):  # fmt: skip
            combo.setCurrentIndex(max(combo.findData(value), 0))
        for w in self._tree_widgets():
            w.blockSignals(False)
        self._enable()

    def _enable_tree(self) -> None:
        """A chain-only drafter holds the width at 1 (restored with a drafter that drafts
        trees); the other tree settings only matter for a tree."""
        spin = self.tree_width_spin
        if self.drafts_trees != spin.isEnabled():
            if spin.isEnabled():
                self._width_kept = spin.value()
            spin.blockSignals(True)
            spin.setValue(self._width_kept if self.drafts_trees else 1)
            spin.blockSignals(False)
            spin.setEnabled(self.drafts_trees)
        tree = self.tree_settings()["tree_width"] > 1
        for w in self._tree_widgets()[1:]:
            w.setEnabled(tree)
        kind = self.drafter_combo.currentData()
        if not self.drafts_trees:
            trees = " or ".join(s.label for s in SPECS.values() if s.drafts_trees)
            why = f"A token tree is drafted by {trees}: the {kind} drafter drafts chains"
            spin.setToolTip(why + " only (Tree width held at 1)")
            self.tree_note.setText(why + " only, so Tree width is held at 1.")
        else:
            spin.setToolTip(WIDTH_TIP)
            self.tree_note.setText(
                "A tree is judged by the tree rule (the multi-draft rule): the Verifier is "
                "held at it while the width is above 1."
            )
        self.tree_note.setVisible(tree or not self.drafts_trees)
        self.tree_shown.emit(tree)

    def _tree_edited(self) -> None:
        self._enable()
        self.tree_edited.emit()

    def _param_value(self, name: str) -> int | str | None:
        spin = self.param_spins[name]
        if isinstance(spin, QLineEdit):
            return spin.text().strip() or None
        value = spin.value()
        if isinstance(spin, QDoubleSpinBox):
            value = round(value, spin.decimals())
        return None if spin.specialValueText() and value == spin.minimum() else value

    def drafting(self) -> tuple[DrafterConfig, PolicyConfig]:
        kind = self.drafter_combo.currentData()
        params = {p.name: self._param_value(p.name) for p in spec(kind).params}
        drafter = DrafterConfig(kind, **params)
        policy = PolicyConfig(
            self.policy_combo.currentData(), threshold=round(self.threshold_spin.value(), 4)
        )
        return drafter, policy

    def set_drafting(self, drafter: DrafterConfig, policy: PolicyConfig) -> None:
        """Show a drafter and policy without emitting `changed`."""
        widgets = (self.drafter_combo, self.policy_combo, *self.param_spins.values(),
                   self.threshold_spin)  # fmt: skip
        for w in widgets:
            w.blockSignals(True)
        self.drafter_combo.setCurrentIndex(max(self.drafter_combo.findData(drafter.kind), 0))
        self.policy_combo.setCurrentIndex(max(self.policy_combo.findData(policy.kind), 0))
        for name, value in drafter.values().items():
            spin = self.param_spins[name]
            if isinstance(spin, QLineEdit):
                spin.setText("" if value is None else str(value))
                self._texts[name] = spin.text()
            else:
                spin.setValue(spin.minimum() if value is None else value)
        self.threshold_spin.setValue(policy.threshold)
        for w in widgets:
            w.blockSignals(False)
        self._enable()

    def show_header(self, header) -> None:
        """Show the drafter and policy a session (live or replayed) records, if it does."""
        drafter, policy = self.drafting()
        if header.drafter:  # from a file: what it does not say right takes the default
            drafter = DrafterConfig.from_json(header.drafter, lenient=True)
        if header.policy:
            threshold = header.policy.get("threshold", policy.threshold)
            threshold = threshold if isinstance(threshold, int | float) else policy.threshold
            policy = PolicyConfig(str(header.policy.get("kind", "constant")), threshold)
        self.set_drafting(drafter, policy)

    def _enable(self) -> None:
        taken = {p.name for p in spec(self.drafter_combo.currentData()).params}
        for name, spin in self.param_spins.items():
            spin.setEnabled(name in taken)
        self.threshold_spin.setEnabled(self.policy_combo.currentData() == "threshold")
        self._enable_tree()

    def _changed(self) -> None:
        self._enable()
        self.changed.emit(*self.drafting())

    def _text_edited(self) -> None:
        """A text parameter changes the drafting once per edit (focus out or Return), and
        only when its text did change."""
        texts = {n: w.text() for n, w in self.param_spins.items() if isinstance(w, QLineEdit)}
        if texts != self._texts:
            self._texts = texts
            self._changed()


def _combo(labels: dict[str, str], value: str) -> QComboBox:
    combo = QComboBox()
    for data, label in labels.items():
        combo.addItem(label, data)
    combo.setCurrentIndex(max(combo.findData(value), 0))
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(12)
    return combo
