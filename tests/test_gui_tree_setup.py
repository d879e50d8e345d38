"""The Setup panel's token-tree controls (Drafting box): they round-trip a session's
settings, width 1 disables the rest, a chain-only drafter or a chain-only verifier cannot
make an invalid tree setting (and the panel says why), and `specviz --tree-width ...` fills
them."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from specviz.core.decoding.k_policy import PolicyConfig  # noqa: E402
from specviz.core.drafters.registry import DrafterConfig  # noqa: E402
from specviz.core.trace.records import TREE_DRAWS, TREE_SHAPES, Settings  # noqa: E402
from specviz.gui.setup.controls import Controls  # noqa: E402
from specviz.gui.setup.drafting_box import TREE_DRAW_LABELS, TREE_SHAPE_LABELS  # noqa: E402

TREE = Settings(
    k=5, seed=3, tree_width=3, tree_budget=24, tree_draw="topk", tree_shape="dynamic"
)  # fmt: skip
CHAIN = Settings(k=6, seed=4, verifier="block", tree_budget=40, tree_draw="topk")


@pytest.fixture
def controls(qtbot):
    c = Controls()
    qtbot.addWidget(c)
    return c


def choose_drafter(controls: Controls, kind: str) -> None:
    combo = controls.drafting_box.drafter_combo
    combo.setCurrentIndex(combo.findData(kind))


def test_the_controls_round_trip_a_tree_and_a_chain(controls):
    box = controls.drafting_box
    assert set(TREE_DRAW_LABELS) == set(TREE_DRAWS) and set(TREE_SHAPE_LABELS) == set(TREE_SHAPES)
    controls.set_settings(TREE)
    assert controls.settings() == TREE
    assert box.tree_width_spin.value() == 3 and box.tree_budget_spin.value() == 24
    assert box.tree_draw_combo.currentText() == "q's top W (EAGLE)"
    assert box.tree_shape_combo.currentText() == "dynamic (EAGLE-2)"
    controls.set_settings(CHAIN)  # after a tree: nothing of it stays
    assert controls.settings() == CHAIN
    assert box.tree_width_spin.text() == "1 (a chain)"
    controls.set_settings(TREE)
    assert controls.settings() == TREE


def test_showing_settings_emits_nothing_and_an_edit_applies_like_k(controls, qtbot):
    seen = []
    controls.settings_changed.connect(seen.append)
    controls.set_settings(TREE)
    assert seen == []
    with qtbot.waitSignal(controls.settings_changed, timeout=1000) as blocker:
        controls.drafting_box.tree_budget_spin.setValue(30)
    assert blocker.args[0].tree_budget == 30 and blocker.args[0].tree_width == 3
    with qtbot.waitSignal(controls.settings_changed, timeout=1000) as blocker:
        controls.drafting_box.tree_shape_combo.setCurrentIndex(0)
    assert blocker.args[0].tree_shape == "full"


def test_width_1_disables_the_other_tree_settings(controls):
    box = controls.drafting_box
    others = (box.tree_budget_spin, box.tree_draw_combo, box.tree_shape_combo)
    assert box.tree_width_spin.isEnabled() and box.tree_width_spin.value() == 1
    assert not any(w.isEnabled() for w in others)
    box.tree_width_spin.setValue(2)
    assert all(w.isEnabled() for w in others)
    box.tree_width_spin.setValue(1)
    assert not any(w.isEnabled() for w in others)
    for w in (box.tree_width_spin, *others):  # one plain-text line each
        tip = w.toolTip()
        assert tip and "<" not in tip and "\n" not in tip


def test_a_chain_only_drafter_holds_the_width_at_1_and_says_why(controls):
    box = controls.drafting_box
    box.tree_width_spin.setValue(4)
    choose_drafter(controls, "lookup")
    assert not box.tree_width_spin.isEnabled() and box.tree_width_spin.value() == 1
    assert controls.settings().tree_width == 1
    controls.settings().validate()
    assert "draft model" in box.tree_width_spin.toolTip()
    assert box.tree_note.isVisibleTo(controls) and "lookup drafter drafts chains" in (
        box.tree_note.text()
    )
    assert not box.tree_budget_spin.isEnabled()
    choose_drafter(controls, "model")  # the width asked for comes back
    assert box.tree_width_spin.isEnabled() and controls.settings().tree_width == 4
    choose_drafter(controls, "early-exit")
    assert controls.settings().tree_width == 1


def test_a_replayed_tree_shows_whatever_drafter_the_box_showed_before(controls):
    """A trace's settings are shown before its drafter (MainWindow._on_session_reset)."""
    box = controls.drafting_box
    choose_drafter(controls, "lookup")
    controls.set_settings(TREE)
    assert controls.settings().tree_width == 1  # never a tree for the lookup drafter
    box.set_drafting(DrafterConfig("model"), PolicyConfig())  # the trace's, not emitted
    assert controls.settings() == TREE
    assert not controls.verifier_combo.isEnabled()


def test_a_tree_holds_the_verifier_at_the_tree_rule(controls, qtbot):
    combo = controls.verifier_combo
    combo.setCurrentIndex(combo.findData("block"))
    with qtbot.waitSignal(controls.settings_changed, timeout=1000) as blocker:
        controls.drafting_box.tree_width_spin.setValue(2)
    emitted = blocker.args[0]
    assert (emitted.tree_width, emitted.verifier) == (2, "tree")
    emitted.validate()
    assert not combo.isEnabled() and combo.currentData() == "tree"
    assert "tree rule" in combo.toolTip() and "Tree width to 1" in combo.toolTip()
    note = controls.drafting_box.tree_note
    assert note.isVisibleTo(controls) and "Verifier is held at it" in note.text()
    controls.drafting_box.tree_width_spin.setValue(1)
    assert combo.isEnabled() and not note.isVisibleTo(controls)
    assert controls.settings().verifier == "token"  # a chain's rule again
    combo.setCurrentIndex(combo.findData("typical"))
    assert controls.settings().verifier == "typical"
    controls.set_settings(TREE)  # shown, not edited: held too
    assert not combo.isEnabled() and controls.settings().verifier == "tree"


def test_the_command_line_opens_the_window_with_a_tree(monkeypatch, capsys):
    from specviz.cli import main as cli_main
    from specviz.gui import app

    args = cli_main.build_parser().parse_args(
        ["gui", "--tree-width", "2", "--tree-budget", "16", "--tree-draw", "topk",
         "--tree-shape", "dynamic"]
    )  # fmt: skip
    settings, _ = cli_main._window_settings(args)
    assert (settings.tree_width, settings.tree_budget) == (2, 16)
    assert (settings.tree_draw, settings.tree_shape) == ("topk", "dynamic")
    args = cli_main.build_parser().parse_args(["gui", "--tree-budget", "8"])
    assert cli_main._window_settings(args)[0] == Settings(seed=1, tree_budget=8)
    assert cli_main._window_settings(cli_main.build_parser().parse_args(["gui"]))[0] is None

    seen = {}
    monkeypatch.setattr(app, "main", lambda *a, **kw: seen.update(kw) or 0)
    assert cli_main.main(["--tree-width", "2", "--tree-budget", "16"]) == 0
    assert seen["settings"].tree_width == 2 and seen["settings"].tree_budget == 16
    capsys.readouterr()
    assert cli_main.main(["--tree-width", "2", "--verifier", "block"]) == 2
    assert "token tree" in capsys.readouterr().err
    assert cli_main.main(["--tree-width", "2", "--drafter", "lookup"]) == 2
    assert "lookup drafter drafts chains only" in capsys.readouterr().err
    assert cli_main.main(["--tree-width", "9"]) == 2


def test_the_panel_shows_the_command_lines_tree(qtbot):
    """What app.main does with the command line's settings."""
    from specviz.gui.main_window import MainWindow

    window = MainWindow(None, autosave=False)
    qtbot.addWidget(window)
    window.controls.set_settings(TREE)
    assert window.controls.settings() == TREE
    assert window.controls.drafting_box.tree_budget_spin.isEnabled()
