"""The lab window: the seeds' example on screen, the editor's rules, Monte Carlo on the
worker thread (live histogram, cancel), the wrong-rule switch, large and real positions."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import threading  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PySide6.QtCore import QObject, Qt, Signal, Slot  # noqa: E402

from specviz.core.lab import montecarlo as lab  # noqa: E402
from specviz.core.lab.distributions import SEED_P, SEED_Q, SEED_TOKENS  # noqa: E402
from specviz.core.lab.position import position_distributions  # noqa: E402
from specviz.core.lab.rules import RULES  # noqa: E402
from specviz.core.metrics.position_bars import REST_LABEL  # noqa: E402
from specviz.gui.lab.bar_plots import show_token
from specviz.gui.lab.window import LabWindow  # noqa: E402
from specviz.gui.lab.worker import LabRequest, LabWorker  # noqa: E402
from specviz.gui.session.threads import start_worker  # noqa: E402


class Gate:
    """Holds the worker inside its first progress report until the test releases it, so a
    cancel lands mid-run however fast the machine is. Connected directly: runs on the
    worker's thread."""

    def __init__(self):
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, *args):
        self.entered.set()
        self.release.wait(10)


@pytest.fixture
def window(qtbot):
    w = LabWindow()
    qtbot.addWidget(w)
    return w


def run_to_end(qtbot, window, n: int, rule: str = "correct"):
    mc = window.monte_carlo
    mc.rule.setCurrentIndex(RULES.index(rule))
    mc.samples.setValue(n)
    # Wait on the panel's GUI-thread signals: pytest-qt's blocker must not be woken from
    # the worker's thread (its timer would be stopped from there).
    with qtbot.waitSignal(mc.run_finished, timeout=60_000):
        mc.run()
    assert not mc.running
    return mc.result


def test_opens_on_the_seeds_example(window):
    assert window.editor.labels == SEED_TOKENS
    assert window.editor.p.tolist() == pytest.approx(SEED_P)
    assert window.editor.q.tolist() == pytest.approx(SEED_Q)
    assert window.arith.alpha == pytest.approx(0.5)
    assert "α = Σ min(p, q) = <b>0.5000</b>" in window.alpha_label.text()
    bars = window.position_bars
    assert bars.labels == SEED_TOKENS
    for series, expected in enumerate(
        ([0.5, 0.1, 0.1, 0.3], [0.2, 0.4, 0.3, 0.1], [0.2, 0.1, 0.1, 0.1], [0.3, 0, 0, 0.2])
    ):
        assert bars.heights(series).tolist() == pytest.approx(expected)
    assert bars.heights(4).tolist() == pytest.approx([0.6, 0, 0, 0.4])  # the residual
    table = window.table
    # token A: p, q, min, max(0, p - q), residual, (1 - alpha) * residual, sum, check
    assert [table.cell(0, c) for c in range(9)] == [
        "A", "0.5000", "0.2000", "0.2000", "0.3000", "0.6000", "0.3000", "0.5000", "✓",
    ]  # fmt: skip
    assert [table.cell(4, c) for c in (0, 3, 6, 7)] == ["Σ", "0.5000", "0.5000", "1.0000"]
    assert "correct" in window.monte_carlo.rule_note.text()


def test_dragging_q_towards_p_raises_alpha(window):
    editor = window.editor
    alphas = [window.arith.alpha]
    residual_mass = [window.arith.excess.sum()]
    for value in (300, 400, 500):  # q(A): 0.2 -> 0.5 = p(A)
        editor.slider("q", 0).setValue(value)
        alphas.append(window.arith.alpha)
        residual_mass.append(window.arith.excess.sum())
        assert editor.q.sum() == pytest.approx(1.0)
        assert editor.q[0] == pytest.approx(value / 1000)
    assert alphas == sorted(alphas) and alphas[-1] > alphas[0] + 0.1
    assert residual_mass == sorted(residual_mass, reverse=True)
    assert window.position_bars.heights(1)[0] == pytest.approx(0.5)
    assert editor.spin("q", 0).value() == pytest.approx(0.5)


def test_editor_keeps_p_and_q_normalised_and_refuses_negatives(window, qtbot):
    editor = window.editor
    for kind, index, value in (("p", 1, 0.7), ("q", 3, 0.05), ("p", 0, 1.0), ("p", 2, 0.3)):
        editor.spin(kind, index).setValue(value)
        assert editor.p.sum() == pytest.approx(1.0) and editor.q.sum() == pytest.approx(1.0)
        assert getattr(editor, kind)[index] == pytest.approx(value)
    assert (editor.p >= 0).all() and (editor.q >= 0).all()
    before = editor.p
    with qtbot.waitSignal(editor.refused):
        with pytest.raises(ValueError, match="between 0 and 1"):
            editor.set_entry("p", 1, -0.2)
    assert editor.p.tolist() == before.tolist()
    with pytest.raises(ValueError, match="negative"):
        editor.set_values([0.5, -0.1, 0.6], [0.2, 0.4, 0.4])
    with pytest.raises(ValueError, match="negative"):
        window.set_distributions(np.array([0.5, -0.1, 0.6]), np.array([0.2, 0.4, 0.4]))
    assert editor.p.tolist() == before.tolist()
    assert editor.spin("p", 0).minimum() == 0.0 and editor.slider("q", 0).minimum() == 0
    editor.spin("p", 2).setValue(-1.0)  # the box clamps to 0: never negative
    assert editor.p[2] == 0.0 and editor.p.sum() == pytest.approx(1.0)
    editor.add_token()
    assert editor.labels[-1] == "E" and editor.p.size == 5 and editor.p[-1] == 0.0
    editor.reset()
    assert editor.p.tolist() == pytest.approx(SEED_P)


def test_monte_carlo_lands_on_p_live(window, qtbot):
    mc = window.monte_carlo
    updates = []
    mc.result_changed.connect(lambda r: updates.append(r.n))
    result = run_to_end(qtbot, window, 100_000)
    assert result.n == 100_000 and not result.cancelled
    assert len(updates) >= 10 and updates == sorted(updates)  # the histogram grew live
    assert not result.rejects() and result.acceptance_rate == pytest.approx(0.5, abs=0.01)
    assert mc.histogram.heights(1).tolist() == pytest.approx(result.empirical.tolist())
    assert mc.histogram.heights(0).tolist() == pytest.approx(SEED_P)
    assert mc.histogram.heights(2).tolist() == pytest.approx(SEED_Q)
    assert "lands on p" in mc.figures.text() and "100,000 samples" in mc.figures.text()
    assert mc.run_button.isEnabled() and not mc.cancel_button.isEnabled()


@pytest.mark.parametrize("rule", ["naive-reject", "resample-from-p"])
def test_wrong_rule_is_labelled_and_misses(window, qtbot, rule):
    window.monte_carlo.rule.setCurrentIndex(RULES.index(rule))
    assert "WRONG RULE" in window.monte_carlo.rule_note.text()
    assert window.monte_carlo.rule.currentText().startswith("WRONG")
    result = run_to_end(qtbot, window, 200_000, rule)
    assert result.rule == rule and result.rejects()
    assert "misses p" in window.monte_carlo.figures.text()


def start_held_run(window) -> Gate:
    """A 1M-sample Monte Carlo run in the lab, held inside its first progress report."""
    mc = window.monte_carlo
    gate = Gate()
    mc.worker.progress.connect(gate, Qt.ConnectionType.DirectConnection)
    mc.samples.setValue(1_000_000)
    mc.run()
    assert gate.entered.wait(30)
    return gate


def test_cancel_is_honoured_at_the_next_chunk(window, qtbot):
    mc = window.monte_carlo
    gate = start_held_run(window)
    reports = []
    mc.result_changed.connect(reports.append)
    assert mc.running and mc.cancel_button.isEnabled()
    mc.cancel_button.click()
    with qtbot.waitSignal(mc.run_finished, timeout=30_000) as blocker:
        gate.release.set()
    (result,) = blocker.args
    # the chunk in progress when Cancel was pressed is the last one run
    assert result.cancelled and result.n == lab.chunk_size(1_000_000) < 1_000_000
    assert all(r.n <= result.n for r in reports)
    assert not mc.running and mc.run_button.isEnabled()
    assert "cancelled" in mc.progress.format()


class Driver(QObject):
    """Sends requests to a worker and collects its signals on the GUI thread."""

    start = Signal(object)

    def __init__(self):
        super().__init__()
        self.progress: list = []
        self.finished: list = []

    @Slot(int, object)
    def on_progress(self, run_id, result):
        self.progress.append((run_id, result))

    @Slot(int, object)
    def on_finished(self, run_id, result):
        self.finished.append((run_id, result))


def test_worker_cancel_on_its_thread(qtbot):
    worker, thread = start_worker(LabWorker(), "specviz-lab")
    driver = Driver()
    driver.start.connect(worker.run)  # queued both ways: the worker lives on its thread
    worker.progress.connect(driver.on_progress)
    worker.finished.connect(driver.on_finished)
    try:
        request = LabRequest(1, np.array(SEED_P), np.array(SEED_Q), 1_000_000, "correct", 0)
        gate = Gate()
        worker.progress.connect(gate, Qt.ConnectionType.DirectConnection)
        driver.start.emit(request)
        assert gate.entered.wait(30)
        worker.cancel(1)
        gate.release.set()
        qtbot.waitUntil(lambda: bool(driver.finished), timeout=2_000)
        run_id, result = driver.finished[0]
        assert run_id == 1 and result.cancelled and result.n == lab.chunk_size(1_000_000)
        assert len(driver.progress) == 1
    finally:
        thread.quit()
        thread.wait()


def test_editing_during_a_run_cancels_it(window, qtbot):
    mc = window.monte_carlo
    gate = start_held_run(window)
    window.editor.slider("q", 0).setValue(450)  # new q: the run is cancelled, bars reset
    with qtbot.waitSignal(mc.run_finished, timeout=2_000) as blocker:
        gate.release.set()
    assert blocker.args[0].cancelled and not mc.running
    assert mc.result is None  # the stale histogram is not drawn over the new q
    assert mc.histogram.heights(1).tolist() == [0, 0, 0, 0]
    assert mc.histogram.heights(2)[0] == pytest.approx(0.45)


def test_large_vocabulary_shows_top_20_and_runs_on_all(window, qtbot):
    rng = np.random.default_rng(1)
    p, q = rng.dirichlet([0.2] * 500), rng.dirichlet([0.2] * 500)
    window.set_distributions(p, q, [f"tok{i}" for i in range(500)], "a random 500-token pair")
    assert not window.editor.isVisibleTo(window) and window.editor_note.isVisibleTo(window)
    labels = window.position_bars.labels
    assert len(labels) == 21 and labels[-1] == REST_LABEL
    assert window.position_bars.heights(0).sum() == pytest.approx(1.0)
    result = run_to_end(qtbot, window, 20_000)
    assert result.counts.shape == (500,) and not result.rejects()
    assert window.monte_carlo.histogram.heights(1).sum() == pytest.approx(1.0)
    window.back_button.click()
    assert window.editor.isVisibleTo(window) and window.arith.alpha == pytest.approx(0.5)


def test_set_position_shows_warped_and_raw(window, pair, qtbot):
    from specviz.core.trace.records import Settings

    ids = pair.tokenizer("And the earth was")["input_ids"]
    pos = position_distributions(pair, ids, Settings(temperature=0.6, top_k=10))
    window.set_position(pos, "round 0, position 1")
    assert "round 0, position 1" in window.heading.text()
    bars = window.warped_bars
    top = list(pos.top_ids[:20])
    assert bars.labels[:-1] == pos.top_text[:20] and bars.labels[-1] == REST_LABEL
    assert bars.heights(1)[:-1].tolist() == pytest.approx(pos.p[top].tolist())
    assert bars.heights(0)[:-1].tolist() == pytest.approx(pos.p_raw[top].tolist())
    assert bars.heights(3).sum() == pytest.approx(1.0)
    assert "must use the warped p and q" in window.warped_caption.text()
    assert "top-k 10" in window.warped_caption.text()
    assert window.arith.alpha == pytest.approx(pos.alpha)
    result = run_to_end(qtbot, window, 20_000)
    assert result.counts.shape == (pair.vocab_size,) and not result.rejects()


def test_request_position_signal(window, qtbot):
    window.position_button.click()  # nobody listening: a status message, no signal
    assert "no main window" in window.statusBar().currentMessage()
    with qtbot.waitSignal(window.request_position, timeout=1_000):
        window.position_button.click()


def test_lab_gui_command_starts_and_quits():
    """`specviz lab --gui` in a fresh process: the window opens, no traceback, exit 0."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from PySide6.QtCore import QTimer\n"
        "from PySide6.QtWidgets import QApplication\n"
        "app = QApplication(sys.argv[:1])\n"
        "QTimer.singleShot(1500, app.quit)\n"
        "from specviz.cli.main import main\n"
        "sys.exit(main(['lab', '--gui', '--p', '1,2,3', '--q', '3,2,1']))\n"
    )
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_stored_position_says_what_it_lacks(window):
    """From a replay: the lab's tabs and guide say what applies (issue 15, the lab)."""
    rng = np.random.default_rng(3)
    p, q = rng.dirichlet(np.ones(30)), rng.dirichlet(np.ones(30))
    labels = [f"t{i}" for i in range(30)]
    window.set_stored_position(p, q, labels, "round 2, position 1 (stored top-N)")
    caption = window.warped_caption.text()
    assert "No position yet" not in caption and "nothing raw" in caption
    assert "Drag q(A)" not in window.guide.text()  # p and q are not editable here
    assert show_token(window.position_bars.labels[-1]) == "(rest)"  # short enough to be drawn
    window.back_button.click()
    assert "Drag q(A)" in window.guide.text()


def test_progress_text_fits(window):
    bar = window.monte_carlo.progress
    text = "1,000,000 / 1,000,000 (cancelled)"
    assert bar.minimumWidth() > bar.fontMetrics().horizontalAdvance(text)


def test_bars_tell_their_values_on_hover(window):
    bars = window.position_bars  # the seeds' example: A-D
    text = bars.describe(0)
    assert text.startswith("'A'") and "p (target): 0.5" in text and "q (draft): 0.2" in text
    assert bars.describe(99) == ""


def test_the_sequence_tab_runs_every_rule_on_the_papers_example(window, qtbot):
    """The window's lab on sequences: Sun et al.'s example (p = (1/3, 2/3), q = (2/3, 1/3),
    K = 2) gives token-wise 10/9 and block 11/9 drafts kept a round, both lossless, the
    typical and wrong rules refused by the pairs test; one round shown position by position
    with every rule's stop."""
    from specviz.core.lab.sequence import SEQUENCE_RULES, example_round

    window.set_distributions(np.array([1 / 3, 2 / 3]), np.array([2 / 3, 1 / 3]), ["A", "B"])
    panel = window.sequences
    panel.k.setValue(2)
    panel.rounds.setValue(200_000)
    with qtbot.waitSignal(panel.compared, timeout=60_000) as blocker:
        panel.run()
    results = {r.rule: r for r in blocker.args[0]}
    assert results["token"].mean_accepted == pytest.approx(10 / 9, abs=0.015)
    assert results["block"].mean_accepted == pytest.approx(11 / 9, abs=0.015)
    assert results["token"].lossless and results["block"].lossless
    assert not results["token-block-residual"].lossless
    verdicts = [panel.table.item(row, 4).text() for row in range(panel.table.rowCount())]
    assert verdicts[SEQUENCE_RULES.index("block")] == "lossless (follows p)"
    assert verdicts[SEQUENCE_RULES.index("token-block-residual")] == "misses p (wrong)"
    example = example_round([1 / 3, 2 / 3], [2 / 3, 1 / 3], 2, 200_000)
    table = panel.example  # one row per position, the numbers in columns
    names = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    assert table.rowCount() == 2 and table.item(1, names.index("h_i")).text() == (
        f"{example.h[1]:.4f}"
    )
    kept_by = [table.item(i, names.index("accepted by")).text().split(", ") for i in range(2)]
    assert sum("block" in rules for rules in kept_by) == example.kept["block"]


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_the_lab_fits_1280_by_720_with_every_rule_row_shown(window, qtbot):
    """Issue 37: the lab's least height leaves room for a title bar on a 720-pixel screen;
    at 1280 x 720 the Sequences tab shows all five rule rows and two rows of the first
    round, and each of the guide's tabs (the wrong rules too) shows whole."""
    from specviz.core.lab.sequence import SEQUENCE_RULES

    assert window.minimumSizeHint().height() <= 720 - 30
    window.resize(1280, 720 - 30)
    window.show()
    panel = window.sequences
    window.runs.setCurrentWidget(panel)
    panel.rounds.setValue(1_000)
    with qtbot.waitSignal(panel.compared, timeout=60_000):
        panel.run()
    qtbot.wait(20)
    rows = panel.table.verticalHeader().length()
    assert panel.table.rowCount() == len(SEQUENCE_RULES)
    assert panel.table.viewport().height() >= rows
    bottom = panel.example.mapTo(window, panel.example.rect().bottomLeft()).y()
    assert bottom <= window.centralWidget().geometry().bottom()
    shown = panel.example.viewport().height()
    assert shown >= 2 * panel.example.verticalHeader().defaultSectionSize()
    for tab in range(window.guide_tabs.count()):
        window.guide_tabs.setCurrentIndex(tab)
        qtbot.wait(10)
        scroll = window.guide_tabs.widget(tab)
        assert scroll.widget().height() <= scroll.viewport().height(), tab


def test_the_sequence_tab_says_when_an_example_cannot_tell_a_wrong_rule(window, qtbot):
    """Issue 37: on the seeds' example at K 2 block-token-residual emits exactly block's
    tokens (its wrong residual is never drawn from): never called lossless, and the window
    says so from the counts; the example the panel offers makes every wrong rule miss p."""
    panel = window.sequences
    panel.k.setValue(2)
    with qtbot.waitSignal(panel.compared, timeout=60_000) as blocker:
        panel.run()
    results = {r.rule: r for r in blocker.args[0]}
    wrong = results["block-token-residual"]
    assert wrong.lossless and wrong.rounds_differing == 0  # the test cannot see it here
    verdicts = {panel.table.item(r, 0).text(): panel.table.item(r, 4).text() for r in range(5)}
    assert "lossless" not in verdicts["block-token-residual"]
    assert "same tokens as block" in verdicts["block-token-residual"]
    assert "emitted exactly the tokens block emitted in all 100,000 rounds" in (panel.status.text())
    panel.telling_button.click()
    assert list(window.editor.p) == pytest.approx([0.4, 0.4, 0.2])
    with qtbot.waitSignal(panel.compared, timeout=60_000) as blocker:
        panel.run()
    results = {r.rule: r for r in blocker.args[0]}
    assert results["token"].lossless and results["block"].lossless
    assert not results["block-token-residual"].lossless
    assert not results["token-block-residual"].lossless
    assert "exactly" not in panel.status.text()


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_use_the_selected_position_shows_on_every_tab(window):
    window.show()
    for tab in range(window.tabs.count()):
        window.tabs.setCurrentIndex(tab)
        assert window.position_button.isVisible(), tab
