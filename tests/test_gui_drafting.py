"""The window's drafters and policies (issue 13), its cost-model speedup (issue 12 item 2)
and its greedy check (issue 12 item 7), on the small test models."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from specviz.core.decoding.k_policy import PolicyConfig
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.metrics.running import RunningStats
from specviz.core.metrics.speed_tracker import SpeedTracker, window_text
from specviz.core.trace.rounds import with_extras
from specviz.gui import dialogs, palette
from specviz.gui.greedy_check import describe
from specviz.gui.main_window import MainWindow
from specviz.gui.plots.round_plots import Plots
from specviz.gui.session.loaded import Loaded
from tests.fixtures import sample_header, sample_rounds

TIMEOUT = 60_000
# repeats itself: prompt lookup finds what followed the last tokens earlier on
PROMPT = (
    "In the beginning God created the heaven and the earth. "
    "In the beginning God created the heaven and the earth. In the beginning God"
)


@pytest.fixture(autouse=True)
def quiet(monkeypatch, tmp_path):
    monkeypatch.setattr(dialogs, "AUTO_ANSWER", True)
    monkeypatch.setattr(dialogs, "shown", [])
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))


def make_window(qtbot, specs=None, **kw) -> MainWindow:
    window = MainWindow(specs, **kw)
    qtbot.addWidget(window)
    window.show()
    return window


@pytest.fixture
def window(qtbot, pair_dirs, pair):
    """A window on the test pair, handed to the worker as its load slot would."""
    w = make_window(qtbot)
    target, draft = (str(d) for d in pair_dirs)
    w.controller.engine.link.pair = pair
    w.controller.engine.loaded.emit(
        Loaded(target, draft, pair.target_info, pair.draft_info, str(pair.device), pair.vocab_size)
    )
    w.controls.max_tokens_spin.setValue(40)
    w.controls.set_prompt(PROMPT)
    yield w
    w.close_now()


def step(qtbot, window, n: int = 1) -> None:
    for _ in range(n):
        session = window.session
        count = len(session.rounds) if session is not None else 0

        def drawn(session=session, count=count) -> bool:
            s = window.session
            if s is session:
                return s is not None and len(s.rounds) > count
            return s is not None and len(s.rounds) >= 1

        window.actions_.step.trigger()
        qtbot.waitUntil(drawn, timeout=TIMEOUT)


def test_a_lookup_window_loads_no_draft_model(qtbot, pair_dirs):
    target = str(pair_dirs[0])
    lookup = (DrafterConfig("lookup", ngram_max=3), PolicyConfig())
    window = make_window(qtbot, (target, ""), drafting=lookup)
    qtbot.waitUntil(lambda: window.controller.models is not None, timeout=TIMEOUT)
    assert window.controller.models.draft is None and window.controller.models.draft_spec == ""
    assert window.controller.engine.link.pair.draft is None
    assert "prompt lookup" in window.controls.drafts_label.text()
    assert not window.controls.draft_edit.isEnabled()
    assert window.controls.specs()[1] == ""  # Load loads the target alone
    assert "+" not in window.status.pair.text()
    window.controls.set_prompt(PROMPT)
    step(qtbot, window, 2)
    assert window.session.header.drafter["kind"] == "lookup"
    box = window.controls.drafting_box
    box.drafter_combo.setCurrentIndex(box.drafter_combo.findData("model"))
    assert window.controls.draft_edit.isEnabled()  # a folder pair: the draft is typed again
    window.actions_.step.trigger()
    qtbot.waitUntil(lambda: window.state == "error", timeout=TIMEOUT)
    assert dialogs.shown[-1][1] == "No draft model loaded" and "Load" in dialogs.shown[-1][2]
    window.close_now()


def test_lookup_rounds_show_k_and_the_copied_span_live_and_replayed(qtbot, window, tmp_path):
    box = window.controls.drafting_box
    box.drafter_combo.setCurrentIndex(box.drafter_combo.findData("lookup"))
    step(qtbot, window, 3)
    session = window.session
    assert session.header.drafter["kind"] == "lookup"
    copied = [r for r in session.rounds if r.copied_from is not None]
    assert copied, "the repeated prompt gives a lookup match"
    rnd = copied[0]
    window.select_round(rnd.index)
    view = window.stream.view
    assert view.copied_span is not None
    start, end = rnd.copied_from
    ids = list(session.header.prompt_ids) + [
        t.id for r in session.rounds[: rnd.index] for t in r.tokens if t.emitted
    ]
    texts = window.controller.engine.link.pair.tokenizer.decode(ids[start:end])
    copied = [
        s for s in view.extraSelections() if s.format.background().color().name() == palette.COPIED
    ]
    shown = "".join(s.cursor.selectedText() for s in copied).replace("\u2029", "\n")
    assert shown.replace("\u21b5", "") == texts and len(copied) == end - start
    assert f"K {rnd.k}" in window.stream.round_label.text()
    assert "copied from context" in window.stream.round_label.text()
    assert "copied by prompt lookup" in view.tooltip_at((rnd.index, 0))
    # the plots show K over rounds
    _, ks = window.plots.series(window.plots.k_curve)
    assert list(ks) == [r.k for r in session.rounds]
    # a replayed 1.1 trace shows the same
    path = tmp_path / "lookup.jsonl"
    assert window.files.export_trace(path)
    replay = make_window(qtbot)
    assert replay.files.open_trace(path)
    qtbot.waitUntil(lambda: not replay.controller.drawing, timeout=TIMEOUT)
    replay.select_round(rnd.index)
    assert replay.stream.view.copied_span == view.copied_span
    assert replay.controls.drafting()[0].kind == "lookup"
    _, replay_ks = replay.plots.series(replay.plots.k_curve)
    assert list(replay_ks) == list(ks)
    replay.close_now()


def test_the_policy_reaches_the_engine_and_a_new_drafter_starts_a_new_session(qtbot, window):
    box = window.controls.drafting_box
    box.policy_combo.setCurrentIndex(box.policy_combo.findData("heuristic"))
    step(qtbot, window, 2)
    assert window.controller.engine.link.session.policy.config.kind == "heuristic"
    assert window.session.header.policy["kind"] == "heuristic"
    first = window.session.session_id
    box.drafter_combo.setCurrentIndex(box.drafter_combo.findData("early-exit"))
    spins = box.param_spins
    assert spins["exit_layer"].isEnabled() and not spins["ngram_max"].isEnabled()
    step(qtbot, window)
    assert window.session.session_id != first
    assert window.session.header.drafter["kind"] == "early-exit"


def test_the_speedup_comes_from_the_cost_model_not_the_header(qtbot):
    header = sample_header()  # calibrated once at 10 ms/token
    probe = {
        "context_len": 3,
        "target_ms": [[1, 3.0], [2, 3.5], [5, 4.0]],
        "draft_ms": 1.0,
        "t1_ms": [3.0, 3.0, 3.0],
    }
    rounds = [with_extras(dataclasses.replace(r, k=4), probes=probe) for r in sample_rounds()]
    rounds.append(dataclasses.replace(rounds[1], index=2))
    tracker = SpeedTracker(header)
    points = [tracker.add(r) for r in rounds]
    assert points[1].speedup.status == "measuring"  # 6 steps from 2 probes: too few
    assert "measuring" in window_text(points[1])[0]
    fig = points[-1].figures
    assert fig.baseline_ms_per_token == 3.0  # the probes', not the header's 10
    emitted = sum(r.n_emitted for r in rounds)
    ms = sum(r.draft_ms + r.verify_ms for r in rounds)
    assert points[-1].speedup.value == pytest.approx(3.0 * emitted / ms)
    text, tip = window_text(points[-1])
    assert "baseline 3.00 ms/token" in tip and "rounds 1\u20133" in tip
    assert "c 0.33" in tip and "refined" in text and "Leviathan" in text
    assert "95% interval" in tip
    # a 1.0 trace (no probes) falls back to its header's calibration, labelled so
    old = SpeedTracker(header)
    point = old.add(sample_rounds()[0])
    assert point.figures.baseline_ms_per_token == 10.0
    assert point.speedup.status in ("calibration", "impossible")


def test_an_impossible_speedup_is_flagged_not_plotted(qtbot):
    header = dataclasses.replace(sample_header(), baseline_ms_per_token=1000.0)
    tracker = SpeedTracker(header)  # a baseline far too slow: > K + 1
    stats = RunningStats.for_header(header)
    plots = Plots()
    qtbot.addWidget(plots)
    for rnd in sample_rounds():
        point = tracker.add(rnd)
        plots.add(stats.add(rnd), stats, speed=point)
    assert point.measured is None and point.impossible > 2
    _, measured = plots.series(plots.speedup_measured)
    _, flagged = plots.series(plots.speedup_impossible)
    assert np.isnan(measured).all() and not np.isnan(flagged).any()
    assert len(plots.speedup_impossible.getData()[0]) == 2  # hollow markers
    assert "impossible: " in plots.describe("speedup", 2)
    assert "impossible" in window_text(point)[0]


def test_status_bar_and_remeasure_action(qtbot, window, monkeypatch):
    asked = []
    monkeypatch.setattr(window.controller, "remeasure", lambda: asked.append(1))
    window.actions_.remeasure.trigger()
    assert not asked  # no session yet
    window.resize(1280, 720)
    step(qtbot, window, 2)
    text = window.status.cost.full_text
    assert window.status.cost.text() == text  # whole at 1280 (issue 37: "predicted: r…")
    assert window.status.speedup.text().startswith("speedup")
    assert text.startswith("predicted") and "refined" in text and "Leviathan" in text
    tip = window.status.cost.toolTip()
    assert "baseline" in tip and "ms/token" in tip and "rounds 1\u20132" in tip
    window.actions_.remeasure.trigger()
    assert asked == [1]


def test_greedy_check_finds_no_difference(qtbot, window):
    window.controls.temperature_spin.setValue(0.0)
    window.actions_.greedy.trigger()
    assert "No rounds yet" in dialogs.shown[-1][2]
    step(qtbot, window, 3)
    window.actions_.greedy.trigger()
    qtbot.waitUntil(lambda: window.greedy.last is not None, timeout=TIMEOUT)
    n, diff = window.greedy.last
    assert diff is None and n == sum(r.n_emitted for r in window.session.rounds)
    assert dialogs.shown[-1][2].startswith("Same tokens")


def test_greedy_check_refuses_a_sampled_session_and_names_a_difference(qtbot, window):
    step(qtbot, window)
    window.actions_.greedy.trigger()
    assert "not greedy" in dialogs.shown[-1][2] and window.greedy.last is None
    from specviz.core.decoding.greedy_check import GreedyDiff

    text = describe(10, GreedyDiff(3, 7, 8, 1.25, 1.2500001, " a", " b"))
    assert "token 4 of 10" in text and "1.250000" in text and "' b'" in text


def test_rounds_that_drafted_nothing_are_said_so_and_not_counted_as_zero_accepted(pair):
    """A lookup round without a match drafts nothing: its bonus token is not "all drafts
    were accepted", and the accepted-drafts histogram (and inspect's) leaves it out."""
    from specviz.core.engine.speculative import SpeculativeEngine
    from specviz.core.metrics.position_bars import position_bars
    from specviz.core.metrics.running import RunningStats
    from specviz.core.trace.records import Settings
    from specviz.gui.distribution.text import summary_html
    from tests.test_drafters import LOOKUP, target_only

    engine = SpeculativeEngine(target_only(pair), Settings(k=3, seed=1, max_new_tokens=24),
                               drafter=LOOKUP)  # fmt: skip
    engine.prefill("Xq zv", calibrate=False)
    rounds = list(engine.run())
    empty = [r for r in rounds if r.n_drafted == 0]
    assert empty and len(empty) < len(rounds)
    text = summary_html(position_bars(empty[0], 0))
    assert "nothing was drafted" in text and "all drafts were accepted" not in text
    stats = RunningStats(None, None)
    for rnd in rounds:
        stats.add(rnd)
    assert stats.undrafted == len(empty)
    assert sum(stats.accepted_lengths) == len(rounds) - len(empty)


def test_a_tree_chosen_with_a_new_drafter_waits_for_its_session(qtbot, window):
    """A lookup session; the user picks the draft model and a tree width of 2: the running
    lookup session cannot draft a tree, so the tree waits for the next session (no refusal,
    no dialog), which Step starts with the draft model and drafts trees."""
    box = window.controls.drafting_box
    box.drafter_combo.setCurrentIndex(box.drafter_combo.findData("lookup"))
    step(qtbot, window, 2)
    assert window.session.header.drafter["kind"] == "lookup"
    shown = len(dialogs.shown)
    box.drafter_combo.setCurrentIndex(box.drafter_combo.findData("model"))
    box.tree_width_spin.setValue(2)  # an edit: applied to the running session's next round
    qtbot.wait(200)
    assert len(dialogs.shown) == shown and window.state != "error"
    step(qtbot, window, 1)  # the drafter changed: a new session, with the tree
    assert window.session.header.drafter["kind"] == "model"
    assert window.session.rounds[0].tree is not None


def test_an_eagle3_head_typed_in_the_drafting_box_drafts_the_next_session(qtbot, window, pair,
                                                                          tmp_path):  # fmt: skip
    from specviz.core.drafters.eagle3.format import save_head
    from tests.test_eagle3 import random_head

    folder = tmp_path / "eagle3"
    save_head(random_head(pair, pair.vocab_size // 2), folder, verifier="fixture")
    box = window.controls.drafting_box
    changes = []
    box.changed.connect(lambda drafter, policy: changes.append(drafter))
    box.drafter_combo.setCurrentIndex(box.drafter_combo.findData("eagle3"))
    edit = box.param_spins["head"]
    assert edit.isEnabled() and not box.param_spins["ngram_max"].isEnabled()
    assert edit.placeholderText() == "the pair's own"
    edit.setText(str(folder))
    edit.editingFinished.emit()
    edit.editingFinished.emit()  # focus out after Return: the same text, no second change
    assert [c.values().get("head") for c in changes] == [None, str(folder)]
    step(qtbot, window, 2)
    assert window.session.header.drafter == {"kind": "eagle3", "head": str(folder)}
    assert any(r.n_drafted for r in window.session.rounds)  # the head drafted


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_the_widest_speedup_line_fits_the_status_bar_at_1280(qtbot):
    """Issue 37: the point estimate, its interval, its verdict and both predictions fit
    beside the bar's other figures in a 1280-pixel window (none of it cut to "r…")."""
    from PySide6.QtWidgets import QLabel

    from specviz.core.metrics.speedup import Speedup
    from specviz.gui.status_bar import StatusBar

    widest = Speedup(10.88, 10.05, 12.75, "ok", 5.0, 9, 3, 16.0)
    wide = Speedup(0.88, 0.55, 1.75, "noisy", 5.0, 9, 3, 16.0)
    bar = StatusBar()
    qtbot.addWidget(bar)
    bar.resize(1280, 24)
    bar.set_pair("builtin:smollm2", "cuda:0")
    bar.set_engine("engine: child process")
    predicted = "predicted 10.88\u00d7 refined, 10.86\u00d7 Leviathan"
    for sp in (widest, wide):
        bar.speedup.setText(f"speedup {sp.brief()}")
        bar.cost.setText(predicted)
        assert bar.speedup.text() == f"speedup {sp.brief()}" and bar.cost.text() == predicted
    assert wide.brief() == "0.88\u00d7 [0.55\u20131.75] too noisy"
    from specviz.core.metrics.speed_tracker import SpeedPoint

    # the Speedup plot draws a noisy figure's point estimate (its band beside it)
    assert SpeedPoint(0, 4, wide, None, None, None).measured == 0.88
    bar.show()
    bar.set_state("running")
    qtbot.wait(10)
    used = sum(w.sizeHint().width() for w in bar.findChildren(QLabel) if w.isVisible())
    used += bar.cost.sizeHint().width()  # the predictions (not a QLabel)
    assert used <= 1280
