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
from specviz.core.drafters.base import DRAFTERS, DrafterConfig

DRAFTER_LABELS = {
    "model": "the draft model",
    "lookup": "prompt lookup (n-grams, no model)",
    "early-exit": "early exit (the target's first layers)",
}
POLICY_LABELS = {
    "constant": "constant K",
    "heuristic": "heuristic (+2 / -1)",
    "threshold": "confidence threshold",
}
DRAFTER_TIPS = {
    "model": "A second, smaller model drafts (the classic pair)",
    "lookup": "Copy what followed the last n tokens where they appeared before in the prompt "
    "or the text so far (transformers' prompt_lookup_num_tokens). No draft model is loaded; "
    "q is one-hot, so a copied token is kept with probability p",
    "early-exit": "The target's first L layers, its final norm and head draft "
    "(transformers' assistant_early_exit). No draft model is loaded",
}


def describe_drafter(drafter: DrafterConfig) -> str:
    """What drafts, in words (the Models box and the status bar)."""
    if drafter.kind == "lookup":
        return f"prompt lookup, n-grams up to {drafter.ngram_max} (no draft model)"
    if drafter.kind == "early-exit":
        layers = "half" if drafter.exit_layer is None else str(drafter.exit_layer)
        return f"the target's first {layers} layers (no draft model)"
    return "the draft model"


class DraftingBox(QGroupBox):
    changed = Signal(object, object)  # DrafterConfig, PolicyConfig

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Drafting", parent)
        d, p = DrafterConfig(), PolicyConfig()
        self.drafter_combo = QComboBox()
        for kind in DRAFTERS:
            self.drafter_combo.addItem(DRAFTER_LABELS.get(kind, kind), kind)
            self.drafter_combo.setItemData(
                self.drafter_combo.count() - 1,
                DRAFTER_TIPS.get(kind, ""),
                3,  # ToolTipRole
            )
        self.drafter_combo.setToolTip("Who proposes the K tokens of a round")
        self.drafter_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.drafter_combo.setMinimumContentsLength(12)
        self.ngram_spin = QSpinBox()
        self.ngram_spin.setRange(1, 64)
        self.ngram_spin.setValue(d.ngram_max)
        self.ngram_spin.setToolTip("lookup: the longest n-gram matched (max_matching_ngram_size)")
        self.exit_spin = QSpinBox()
        self.exit_spin.setRange(0, 1000)
        self.exit_spin.setValue(0)
        self.exit_spin.setSpecialValueText("half")
        self.exit_spin.setToolTip("early exit: how many of the target's layers draft")
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
        form.addRow("N-gram max", self.ngram_spin)
        form.addRow("Exit layer", self.exit_spin)
        form.addRow("K policy", self.policy_combo)
        form.addRow("Threshold", self.threshold_spin)
        form.addRow(note)
        for combo in (self.drafter_combo, self.policy_combo):
            combo.currentIndexChanged.connect(self._changed)
        for spin in (self.ngram_spin, self.exit_spin, self.threshold_spin):
            spin.valueChanged.connect(self._changed)
        self._enable()

    def drafting(self) -> tuple[DrafterConfig, PolicyConfig]:
        exit_layer = self.exit_spin.value() or None
        drafter = DrafterConfig(
            self.drafter_combo.currentData(),
            ngram_max=self.ngram_spin.value(),
            exit_layer=exit_layer,
        )
        policy = PolicyConfig(
            self.policy_combo.currentData(), threshold=round(self.threshold_spin.value(), 4)
        )
        return drafter, policy

    def set_drafting(self, drafter: DrafterConfig, policy: PolicyConfig) -> None:
        """Show a drafter and policy without emitting `changed`."""
        widgets = (self.drafter_combo, self.policy_combo, self.ngram_spin, self.exit_spin,
                   self.threshold_spin)  # fmt: skip
        for w in widgets:
            w.blockSignals(True)
        self.drafter_combo.setCurrentIndex(max(self.drafter_combo.findData(drafter.kind), 0))
        self.policy_combo.setCurrentIndex(max(self.policy_combo.findData(policy.kind), 0))
        self.ngram_spin.setValue(drafter.ngram_max)
        self.exit_spin.setValue(drafter.exit_layer or 0)
        self.threshold_spin.setValue(policy.threshold)
        for w in widgets:
            w.blockSignals(False)
        self._enable()

    def show_header(self, header) -> None:
        """Show the drafter and policy a session (live or replayed) records, if it does."""
        drafter, policy = self.drafting()
        if header.drafter:
            d = header.drafter
            drafter = DrafterConfig(
                str(d.get("kind", "model")),
                ngram_max=int(d.get("ngram_max", drafter.ngram_max) or drafter.ngram_max),
                exit_layer=d.get("exit_layer") if isinstance(d.get("exit_layer"), int) else None,
            )
        if header.policy:
            threshold = header.policy.get("threshold", policy.threshold)
            threshold = threshold if isinstance(threshold, int | float) else policy.threshold
            policy = PolicyConfig(str(header.policy.get("kind", "constant")), threshold)
        self.set_drafting(drafter, policy)

    def _enable(self) -> None:
        kind = self.drafter_combo.currentData()
        self.ngram_spin.setEnabled(kind == "lookup")
        self.exit_spin.setEnabled(kind == "early-exit")
        self.threshold_spin.setEnabled(self.policy_combo.currentData() == "threshold")

    def _changed(self) -> None:
        self._enable()
        self.changed.emit(*self.drafting())
