"""The Drafting box of the controls: who proposes the K tokens (the draft model, prompt
lookup, the target's first layers) and how K is chosen each round. GUI thread only.

It holds values: `drafting()` is the (DrafterConfig, PolicyConfig) pair the next session
starts with; `changed` says the user chose another.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QSpinBox,
    QWidget,
)

from specviz.core.decoding.k_policy import POLICIES, PolicyConfig
from specviz.core.drafters.registry import SPECS, DrafterConfig, all_params, spec

POLICY_LABELS = {
    "constant": "constant K",
    "heuristic": "heuristic (+2 / -1)",
    "threshold": "confidence threshold",
}


def describe_drafter(drafter: DrafterConfig) -> str:
    """What drafts, in words (the Models box and the status bar)."""
    return drafter.spec.words(drafter.values())


class DraftingBox(QGroupBox):
    changed = Signal(object, object)  # DrafterConfig, PolicyConfig

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
        self.param_spins: dict[str, QSpinBox] = {}
        for param in all_params():
            spin = QSpinBox()
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
        note = QLabel("The drafter and the policy start a new session.")
        note.setWordWrap(True)
        note.setStyleSheet("color: #666;")
        form = QFormLayout(self)
        form.addRow("Drafter", self.drafter_combo)
        for param in all_params():
            form.addRow(param.label, self.param_spins[param.name])
        form.addRow("K policy", self.policy_combo)
        form.addRow("Threshold", self.threshold_spin)
        form.addRow(note)
        for combo in (self.drafter_combo, self.policy_combo):
            combo.currentIndexChanged.connect(self._changed)
        for spin in (*self.param_spins.values(), self.threshold_spin):
            spin.valueChanged.connect(self._changed)
        self._enable()

    def _param_value(self, name: str) -> int | None:
        spin = self.param_spins[name]
        value = spin.value()
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

    def _changed(self) -> None:
        self._enable()
        self.changed.emit(*self.drafting())
