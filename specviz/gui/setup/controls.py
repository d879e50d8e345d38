"""The left panel: prompt, model pair, sampling settings. GUI thread only.

It holds values, not behaviour: the main window listens to `settings_changed` (applied
from the next round) and `load_requested` (a new pair, hence a new session).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from specviz.core.models.builtin import BUILTIN_PAIRS, DEFAULT_PAIR
from specviz.core.resources import DEMO_SEED, chat_example_prompts, example_prompts
from specviz.core.trace import verifiers
from specviz.core.trace.records import Settings
from specviz.gui.setup.drafting_box import DraftingBox, describe_drafter

CUSTOM = "Custom: hub id or folder"
DEVICES = ("cpu", "cuda", "auto")
CHAT_TIP = (
    "On: the models read the prompt as a user's message in the target's chat template, "
    "and answer it (an instruct model's way). Off: they continue the raw text. On by "
    "default for an instruct target. A change starts a new session."
)
DTYPES = ("auto", "float32", "bfloat16", "float16", "config")  # cli.options' --dtype
MAX_K = 32  # as Settings.validate allows
VERIFIER_TREE_TIP = "A token tree is judged by a tree rule: set Tree width to 1 for a chain's"


def builtin_pairs() -> list[str]:
    """Names of the built-in pairs, the default first."""
    names = [name for name in BUILTIN_PAIRS if name != DEFAULT_PAIR]
    return [DEFAULT_PAIR, *names] if DEFAULT_PAIR in BUILTIN_PAIRS else names


class Controls(QWidget):
    settings_changed = Signal(object)  # Settings
    load_requested = Signal(str, str, str, str)  # target, draft, device, dtype

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        # What a user changes most comes first: at 1280x720 the prompt, K and the
        # temperature show without scrolling; the models (set once) come last.
        layout.addWidget(self._prompt_box())
        self.drafting_box = DraftingBox()
        layout.addWidget(self._sampling_box())
        layout.addWidget(self.drafting_box)
        layout.addWidget(self._models_box())
        self.drafting_box.changed.connect(self._drafter_changed)
        self._drafter_changed()
        self.drafting_box.tree_shown.connect(self._hold_verifier)
        self.drafting_box.tree_edited.connect(self._emit_settings)
        self._hold_verifier(self.drafting_box.tree_settings()["tree_width"] > 1)
        layout.addStretch(1)

    # ------------------------------------------------------------------------------ prompt

    def _prompt_box(self) -> QGroupBox:
        box = QGroupBox("Prompt")
        self.examples = QComboBox()
        self.examples.activated.connect(self._use_example)
        self.examples.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.examples.setMinimumContentsLength(16)
        self.prompt_edit = QPlainTextEdit()
        self.prompt_edit.setPlaceholderText("Type the text the models should continue")
        self.prompt_edit.setMinimumHeight(70)
        self.prompt_edit.setMaximumHeight(120)
        # the example the prompt shows until one is typed or chosen (None: one was); the
        # empty box at the start counts as untouched
        self._default_prompt: str | None = ""
        self.chat_check = QCheckBox("Chat: the prompt as a user turn")
        self.chat_check.setToolTip(CHAT_TIP)
        self._chat_given = False  # the command line's --chat / --no-chat: kept over loads
        self._fit_examples()
        self.chat_check.toggled.connect(self._fit_examples)
        box_layout = QVBoxLayout(box)
        box_layout.addWidget(self.examples)
        box_layout.addWidget(self.prompt_edit)
        box_layout.addWidget(self.chat_check)
        return box

    def chat(self) -> bool:
        return self.chat_check.isChecked()

    def set_chat(self, on: bool, given: bool = False) -> None:
        """Tick or untick Chat; given: the user's choice (--chat / --no-chat), which a
        later load does not change."""
        self._chat_given = self._chat_given or given
        self.chat_check.setChecked(on)

    def offer_chat(self, instruct: str | None) -> None:
        """A pair was loaded: Chat on for an instruct target (instruct: why, from
        core.models.chat), off otherwise, unless the command line chose."""
        tip = f"{CHAT_TIP}\n\nThis target: {instruct}." if instruct else CHAT_TIP
        self.chat_check.setToolTip(tip)
        if not self._chat_given:
            self.chat_check.setChecked(instruct is not None)
        self._fit_examples()

    def _fit_examples(self, *_args) -> None:
        """Example prompts for the way the target reads them: questions while Chat is on (an
        instruct pair answers them), text to continue while it is off. The prompt follows
        while it is the example shown first (nothing typed, chosen or given)."""
        chat = self.chat_check.isChecked()
        prompts = chat_example_prompts() if chat else example_prompts()
        self.examples.clear()
        self.examples.addItem("Example questions\u2026" if chat else "Example prompts\u2026")
        for text in prompts:
            self.examples.addItem(text if len(text) < 60 else text[:57] + "\u2026", text)
        if prompts and self._default_prompt is not None and self.prompt() == self._default_prompt:
            self._default_prompt = prompts[0]
            self.prompt_edit.setPlainText(prompts[0])

    def _use_example(self, index: int) -> None:
        text = self.examples.itemData(index)
        if text:
            self.set_prompt(text)
        self.examples.setCurrentIndex(0)

    def prompt(self) -> str:
        return self.prompt_edit.toPlainText()

    def set_prompt(self, text: str) -> None:
        """A prompt chosen (an example, the command line's, a session's): kept when Chat or
        the pair changes."""
        self._default_prompt = None
        self.prompt_edit.setPlainText(text)

    # ------------------------------------------------------------------------------ models

    def _models_box(self) -> QGroupBox:
        box = QGroupBox("Models")
        self.pair_combo = QComboBox()
        for name in builtin_pairs():
            self.pair_combo.addItem(f"built-in: {name}", f"builtin:{name}")
        self.pair_combo.addItem(CUSTOM, None)
        self.pair_combo.currentIndexChanged.connect(self._pair_changed)
        self.pair_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.pair_combo.setMinimumContentsLength(12)
        self.target_edit, target_row = self._path_row("target: hub id or folder")
        self.draft_edit, draft_row = self._path_row("draft: hub id or folder")
        self.device_combo = QComboBox()
        self.device_combo.setEditable(True)
        self.device_combo.addItems(DEVICES)
        self.device_combo.setToolTip("cpu, cuda, cuda:N or auto")
        self.dtype_combo = QComboBox()
        self.dtype_combo.addItems(DTYPES)
        self.drafts_label = QLabel()
        self.drafts_label.setWordWrap(True)
        self.drafts_label.setTextFormat(Qt.TextFormat.PlainText)
        self.drafts_label.setStyleSheet("color: #444;")
        self.load_button = QPushButton("Load models")
        self.load_button.setToolTip("Load the pair on the worker thread (starts a new session)")
        self.load_button.clicked.connect(self._request_load)
        form = QFormLayout(box)
        form.addRow("Pair", self.pair_combo)
        form.addRow("Target", target_row)
        form.addRow("Draft", draft_row)
        device_row = QHBoxLayout()
        device_row.addWidget(self.device_combo, 1)
        device_row.addWidget(self.dtype_combo, 1)
        form.addRow("Device", device_row)
        form.addRow("Drafts", self.drafts_label)
        form.addRow(self.load_button)
        self._pair_changed()
        return box

    def _path_row(self, placeholder: str) -> tuple[QLineEdit, QHBoxLayout]:
        edit = QLineEdit()
        edit.setPlaceholderText(placeholder)
        browse = QToolButton()
        browse.setText("\u2026")
        browse.setToolTip("Choose a local model folder (written by save_pretrained)")
        browse.clicked.connect(lambda: self._browse(edit))
        row = QHBoxLayout()
        row.addWidget(edit, 1)
        row.addWidget(browse)
        return edit, row

    def _browse(self, edit: QLineEdit) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Model folder", edit.text())
        if folder:
            self.pair_combo.setCurrentIndex(self.pair_combo.count() - 1)
            edit.setText(folder)

    def _pair_changed(self) -> None:
        spec = self.pair_combo.currentData()
        custom = spec is None
        self.target_edit.setEnabled(custom)
        self.draft_edit.setEnabled(custom and self.needs_draft_model)
        if not custom:
            self.target_edit.setText(spec)
            self.draft_edit.setText(spec)

    @property
    def needs_draft_model(self) -> bool:
        box = getattr(self, "drafting_box", None)
        return box is None or box.drafting()[0].needs_draft_model

    def drafting(self):
        """(DrafterConfig, PolicyConfig) the next session starts with."""
        return self.drafting_box.drafting()

    def _drafter_changed(self, *_args) -> None:
        """The Models box says what drafts; a drafter without a model loads no draft."""
        self.draft_edit.setEnabled(self.pair_combo.currentData() is None and self.needs_draft_model)
        drafter = self.drafting()[0]
        self.drafts_label.setText(describe_drafter(drafter))
        self.drafts_label.setToolTip(
            "Load models loads the target alone for this drafter"
            if not drafter.needs_draft_model
            else "Load models loads the target and the draft"
        )

    def specs(self) -> tuple[str, str]:
        """(target, draft) as typed or chosen; draft "" when the drafter needs no model."""
        draft = self.draft_edit.text().strip() if self.needs_draft_model else ""
        return self.target_edit.text().strip(), draft

    def set_specs(self, target: str, draft: str) -> None:
        draft = draft or (target if target.startswith("builtin:") else self.draft_edit.text())
        index = self.pair_combo.findData(target) if target == draft else -1
        if index < 0:
            index = self.pair_combo.count() - 1  # custom
        self.pair_combo.setCurrentIndex(index)
        self.target_edit.setText(target)
        self.draft_edit.setText(draft)

    def device(self) -> str:
        return self.device_combo.currentText().strip() or "cpu"

    def set_device(self, device: str, dtype: str | None = None) -> None:
        self.device_combo.setCurrentText(device)
        if dtype:
            self.dtype_combo.setCurrentText(dtype)

    def dtype(self) -> str:
        return self.dtype_combo.currentText()

    def _request_load(self) -> None:
        target, draft = self.specs()
        self.load_requested.emit(target, draft, self.device(), self.dtype())

    # ------------------------------------------------------------------------------ sampling

    def _sampling_box(self) -> QGroupBox:
        box = QGroupBox("Sampling")
        d = Settings()
        self.k_spin = _spin(1, MAX_K, d.k, "drafted tokens per round")
        self.temperature_spin = QDoubleSpinBox()
        self.temperature_spin.setRange(0.0, 5.0)
        self.temperature_spin.setSingleStep(0.1)
        self.temperature_spin.setDecimals(2)
        self.temperature_spin.setValue(d.temperature)
        self.temperature_spin.setSpecialValueText("0 (greedy)")
        self.top_k_spin = _spin(0, 1_000_000, d.top_k, "keep the k most likely tokens")
        self.top_k_spin.setSpecialValueText("off")
        self.top_p_spin = QDoubleSpinBox()
        self.top_p_spin.setRange(0.01, 1.0)
        self.top_p_spin.setSingleStep(0.05)
        self.top_p_spin.setDecimals(2)
        self.top_p_spin.setValue(d.top_p)
        self.top_p_spin.setToolTip("nucleus: keep the smallest set of mass >= top-p (1 = off)")
        self.seed_spin = _spin(0, 2**31 - 1, DEMO_SEED, "random seed (applies to the next session)")
        self.max_tokens_spin = _spin(1, 100_000, d.max_new_tokens, "stop after this many tokens")
        self.top_n_spin = _spin(1, 1000, d.top_n, "tokens stored per position (bars, replay)")
        self.ignore_eos_check = QCheckBox("Ignore end-of-text")
        self.ignore_eos_check.setChecked(d.ignore_eos)
        self.ignore_eos_check.setToolTip(
            "Go on past the end-of-text token (as min_new_tokens / a suppressed EOS in "
            "generate): the session ends only at max new tokens or the context length"
        )
        self.verifier_combo = QComboBox()
        for rule in verifiers.SPECS.values():  # a tree's rules held until a tree (_hold_verifier)
            self.verifier_combo.addItem(rule.text, rule.name)
            self.verifier_combo.setItemData(
                self.verifier_combo.count() - 1, rule.description, Qt.ItemDataRole.ToolTipRole
            )
        self.verifier_combo.setToolTip(verifier_tip())
        form = QFormLayout(box)
        form.addRow("K (drafts / round)", self.k_spin)
        form.addRow("Temperature", self.temperature_spin)
        form.addRow("Top-k", self.top_k_spin)
        form.addRow("Top-p", self.top_p_spin)
        form.addRow("Seed", self.seed_spin)
        form.addRow("Max new tokens", self.max_tokens_spin)
        form.addRow("Top-N stored", self.top_n_spin)
        form.addRow("Verifier", self.verifier_combo)
        form.addRow(self.ignore_eos_check)
        note = QLabel(
            "Changes apply from the next round; the seed and the prompt start a new session."
        )
        note.setWordWrap(True)
        note.setStyleSheet("color: #666;")
        form.addRow(note)
        for spin in self._spins():
            spin.valueChanged.connect(self._emit_settings)
        self.ignore_eos_check.toggled.connect(self._emit_settings)
        self.verifier_combo.currentIndexChanged.connect(self._emit_settings)
        return box

    def _spins(self):
        return (
            self.k_spin,
            self.temperature_spin,
            self.top_k_spin,
            self.top_p_spin,
            self.seed_spin,
            self.max_tokens_spin,
            self.top_n_spin,
        )

    def settings(self) -> Settings:
        return Settings(
            k=self.k_spin.value(),
            temperature=round(self.temperature_spin.value(), 4),
            top_k=self.top_k_spin.value(),
            top_p=round(self.top_p_spin.value(), 4),
            seed=self.seed_spin.value(),
            max_new_tokens=self.max_tokens_spin.value(),
            top_n=self.top_n_spin.value(),
            ignore_eos=self.ignore_eos_check.isChecked(),
            verifier=self.verifier_combo.currentData() or "token",
            **self.drafting_box.tree_settings(),
        )

    def set_settings(self, s: Settings) -> None:
        """Show a session's settings without emitting settings_changed."""
        values = (s.k, s.temperature, s.top_k, s.top_p, s.seed, s.max_new_tokens, s.top_n)
        for spin, value in zip(self._spins(), values, strict=True):
            spin.blockSignals(True)
            spin.setValue(value)
            spin.blockSignals(False)
        self.ignore_eos_check.blockSignals(True)
        self.ignore_eos_check.setChecked(s.ignore_eos)
        self.ignore_eos_check.blockSignals(False)
        self.verifier_combo.blockSignals(True)
        self.verifier_combo.setCurrentIndex(max(self.verifier_combo.findData(s.verifier), 0))
        self.verifier_combo.blockSignals(False)
        self.drafting_box.set_tree(s)  # holds the verifier for a tree (tree_shown)

    def _hold_verifier(self, tree: bool) -> None:
        """A token tree is judged by a tree rule (core.trace.verifiers): while the rounds
        draft one, the verifier is held at it, and a chain's rules are offered otherwise
        (without emitting; the tree's own change emits)."""
        combo = self.verifier_combo
        if verifiers.spec(combo.currentData() or "token").trees != tree:
            combo.blockSignals(True)
            combo.setCurrentIndex(combo.findData(verifiers.names(trees=tree)[0]))
            combo.blockSignals(False)
        for i in range(combo.count()):
            combo.model().item(i).setEnabled(verifiers.spec(combo.itemData(i)).trees == tree)
        combo.setEnabled(not tree)
        combo.setToolTip(VERIFIER_TREE_TIP if tree else verifier_tip())

    def show_session(self, header) -> None:
        """Show the prompt (the text typed, of a chat turn) and settings a session (live or
        replayed) started with, without emitting anything."""
        self.set_settings(header.settings)
        if self.prompt() != header.typed_prompt:
            self.prompt_edit.blockSignals(True)
            self.set_prompt(header.typed_prompt)
            self.prompt_edit.blockSignals(False)
        self.chat_check.setChecked(header.chat is not None)

    def _emit_settings(self) -> None:
        self.settings_changed.emit(self.settings())


def verifier_tip() -> str:
    """The Verifier combo's tooltip: each chain rule's line (core.trace.verifiers)."""
    rules = (s for s in verifiers.SPECS.values() if not s.trees)
    return "How the drafts are judged:\n" + "\n".join(f"{s.text}: {s.description}" for s in rules)


def _spin(low: int, high: int, value: int, tip: str) -> QSpinBox:
    spin = QSpinBox()
    spin.setRange(low, high)
    spin.setValue(value)
    spin.setToolTip(tip)
    return spin
