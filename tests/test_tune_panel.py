"""The Tune panel on its own: the advisor from round records, an impossible speedup never
plotted, Apply K, a sweep as a job on another thread (the UI stays live), cancelling it.
The window hands the panel its engine worker's run_job (tests/test_gui_window.py); here a
plain thread runs the job on the fixture pair, as the engine's thread would."""

from __future__ import annotations

import json
import threading

import pytest

from specviz.core.trace.records import Round, Settings, TokenEvent
from specviz.core.trace.rounds import with_extras
from specviz.gui.tune.panel import TunePanel


def make_round(index, n_acc, k=4, ms=20.0, probes=None):
    tokens = [TokenEvent(id=1, text="a", status="accepted")] * n_acc
    if n_acc < k:
        tokens += [TokenEvent(id=2, text="r", status="rejected")]
        tokens += [TokenEvent(id=2, text="d", status="discarded")] * (k - n_acc - 1)
        tokens += [TokenEvent(id=3, text="\x1b[31m", status="resampled")]
    else:
        tokens += [TokenEvent(id=3, text="b", status="bonus")]
    return with_extras(
        Round("s", index, 10, ms / 2, ms / 2, k, n_acc, tuple(tokens)), probes=probes
    )


def probe(t1=10.0, draft=1.0):
    return {
        "context_len": 10,
        "target_ms": [[n, t1 + 0.5 * (n - 1)] for n in range(1, 18)],
        "draft_ms": draft,
        "t1_ms": [t1] * 3,
    }


def n_points(item) -> int:
    x = item.getData()[0]
    return 0 if x is None else len(x)


def on_a_thread(pair):
    """A runner as the engine worker's: the job runs on a thread of its own, on an engine
    over `pair` (the window's worker hands it the session's engine)."""
    from specviz.core.host.session_host import SessionHost

    def run_job(job):
        threading.Thread(target=job, args=(SessionHost(pair),), daemon=True).start()

    return run_job


@pytest.fixture
def panel(qtbot):
    widget = TunePanel()
    qtbot.addWidget(widget)
    yield widget
    widget.shutdown()


def test_advisor_from_round_records(panel):
    rounds = [make_round(i, 3, probes=probe() if i < 3 else None) for i in range(16)]
    panel.add_rounds(rounds[:1])
    first = panel.k_box.value()
    assert "Only a guess so far: 1 rounds and 1 probes" in panel.summary.text()
    panel.add_rounds(rounds[1:6])
    assert panel.k_box.value() == first  # not offered from 6 rounds
    panel.add_rounds(rounds[6:])
    fig = panel.figures
    x, y = panel.plot.refined.getData()
    assert list(x) == list(range(1, 17)) and len(y) == 16
    bx, by = panel.plot.best.getData()
    assert list(bx) == [fig.best_k] and by[0] == pytest.approx(max(y))
    sx, sy = panel.plot.session.getData()
    assert list(sx) == [4] and sy[0] == pytest.approx(fig.speedup_measured)
    assert n_points(panel.plot.leviathan) == 16
    assert "baseline T_t(1) 10.00 ms/token" in panel.summary.text()
    assert "rounds 0-15" in panel.summary.text() and "guess" not in panel.summary.text()
    assert panel.k_box.value() == fig.best_k != first
    # 3 of 4 accepted each round: K'=2 would have kept both and added a bonus.
    assert (
        "ESTIMATE" in panel.whatif.text() and "K'=2 acceptance 1.000 (3.00" in panel.whatif.text()
    )
    panel.reset()
    assert panel.summary.text() == "no rounds yet" and n_points(panel.plot.refined) == 0


def test_impossible_speedup_is_flagged_not_plotted(panel):
    # K = 1 rounds of 2 tokens in 10 ms against a target said to cost 100 ms: 20x > K + 1.
    rounds = [make_round(i, 1, k=1, ms=10.0, probes=probe(t1=100.0)) for i in range(3)]
    rounds += [make_round(i, 1, k=1, ms=10.0) for i in range(3, 5)]
    panel.add_rounds(rounds)
    assert panel.figures.impossible
    assert n_points(panel.plot.session) == 0
    assert "impossible" in panel.summary.text()


def test_apply_k_and_remeasure(panel, qtbot):
    panel.k_box.setValue(5)
    with qtbot.waitSignal(panel.apply_k) as blocker:
        panel.apply_button.click()
    assert blocker.args == [5]
    with qtbot.waitSignal(panel.remeasure):
        panel.remeasure_button.click()


def test_sweep_without_models_or_with_a_bad_file_says_so(panel, tmp_path):
    assert not panel.start_sweep()
    assert "no models" in panel.status.text()
    panel.set_runner(lambda job: pytest.fail("a sweep of a bad file started"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    panel.set_prompt_file(str(bad))
    assert not panel.start_sweep()
    assert "line 1: not JSON" in panel.status.text() and not panel.sweeping


def prompts_file(tmp_path, n=2):
    path = tmp_path / "p.jsonl"
    rows = [{"category": "bible", "prompt": "In the beginning God"}]
    rows += [{"category": "fortune", "prompt": "A fool and his money"}] * (n - 1)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_sweep_runs_on_a_worker_thread(panel, pair, qtbot, tmp_path):
    panel.set_runner(on_a_thread(pair))
    panel.set_settings(Settings(temperature=1.0, seed=3))
    panel.set_prompt_file(prompts_file(tmp_path))
    panel.k_from.setValue(1)
    panel.k_to.setValue(2)
    panel.tokens.setValue(8)
    with qtbot.waitSignal(panel.sweep_running) as started:
        assert panel.start_sweep()
    assert started.args == [True] and not panel.sweep_button.isEnabled()
    with qtbot.waitSignal(panel.sweep_running, timeout=120_000) as stopped:
        pass
    assert stopped.args == [False]
    assert panel.result.total == 4 and len(panel.result.runs) == 4
    assert panel.progress.value() == 4 and panel.status.text().startswith("done")
    assert [panel.category.itemText(i) for i in range(panel.category.count())] == [
        "overall",
        "bible",
        "fortune",
    ]
    assert panel.table.rowCount() == 2 and panel.table.item(1, 0).text() == "2"
    assert n_points(panel.plot.sweep) == 2 and n_points(panel.plot.sweep_curve) == 16
    panel.table.selectRow(1)
    assert panel.k_box.value() == 2
    check_per_prompt_rows(panel, qtbot)


def check_per_prompt_rows(panel, qtbot):
    """The per-prompt table after a 2-prompt, K 1-2 sweep: a row per run with its figures;
    double-click and "Open trace" emit open_trace with a trace of that run."""
    from specviz.core.trace import files as tracefile

    runs = panel.runs
    cells = [
        [runs.table.item(i, j).text() for j in range(runs.table.columnCount())]
        for i in range(runs.table.rowCount())
    ]
    assert [c[:3] for c in cells] == [
        ["1", "bible", "1"], ["1", "bible", "2"], ["2", "fortune", "1"], ["2", "fortune", "2"]
    ]  # fmt: skip
    for row, c in zip(runs.rows, cells, strict=True):
        run = next(
            r for r in panel.result.runs if (r.prompt_index, r.k) == (row.prompt_index, row.k)
        )
        judged = [
            t.status for r in run.rounds for t in r.tokens if t.status in ("accepted", "rejected")
        ]
        emitted = sum(r.n_emitted for r in run.rounds)
        assert c[3] == f"{judged.count('accepted') / len(judged):.3f}"
        assert c[4] == f"{emitted / len(run.rounds):.2f}" and c[5] == row.speedup.short()
    with qtbot.waitSignal(panel.open_trace) as opened:
        runs.table.cellDoubleClicked.emit(3, 0)
    run = next(r for r in panel.result.runs if (r.prompt_index, r.k) == (1, 2))
    session = tracefile.load(opened.args[0])
    assert session.header.settings.k == 2 and session.header.prompt == "A fool and his money"
    assert [(r.n_drafted, r.n_accepted, [t.id for t in r.tokens]) for r in session.rounds] == [
        (r.n_drafted, r.n_accepted, [t.id for t in r.tokens]) for r in run.rounds
    ]
    runs.table.selectRow(0)
    with qtbot.waitSignal(panel.open_trace) as opened:
        runs.open_button.click()
    assert opened.args[0] == runs.rows[0].trace_path
    assert tracefile.load(opened.args[0]).header.settings.k == 1
    panel.category.setCurrentText("fortune")
    assert [r.category for r in runs.rows] == ["fortune", "fortune"]


def test_sweep_cancels(panel, pair, qtbot, tmp_path):
    panel.set_runner(on_a_thread(pair))
    panel.set_prompt_file(prompts_file(tmp_path, n=4))
    panel.k_from.setValue(1)
    panel.k_to.setValue(8)
    panel.tokens.setValue(16)
    assert panel.start_sweep()
    qtbot.waitUntil(
        lambda: panel.result is not None and len(panel.result.runs) >= 1, timeout=60_000
    )
    panel.cancel_button.click()
    qtbot.waitUntil(lambda: not panel.sweeping, timeout=60_000)
    assert panel.result.cancelled and len(panel.result.runs) < panel.result.total == 32
    assert panel.status.text().startswith("cancelled") and panel.sweep_button.isEnabled()


def test_a_sweep_drafts_as_the_session_does(panel, pair, qtbot, tmp_path):
    """An early-exit session's sweep sweeps early exit (on the target alone), and says so."""
    import dataclasses

    from specviz.core.decoding.k_policy import PolicyConfig
    from specviz.core.drafters.registry import DrafterConfig

    target_only = dataclasses.replace(pair, draft=None, draft_info=None)
    panel.set_runner(on_a_thread(target_only))
    panel.set_settings(Settings(temperature=1.0, seed=3))
    panel.set_drafting(DrafterConfig("early-exit", exit_layer=1), PolicyConfig())
    panel.set_prompt_file(prompts_file(tmp_path))
    panel.k_from.setValue(2)
    panel.k_to.setValue(2)
    panel.tokens.setValue(6)
    with qtbot.waitSignal(panel.sweep_running):
        assert panel.start_sweep()
    assert "the target's first 1 layers" in panel.status.text()
    with qtbot.waitSignal(panel.sweep_running, timeout=120_000):
        pass
    assert panel.result.runs and {r.drafter for r in panel.result.runs} == {"early-exit"}


def test_a_job_without_an_engine_says_so(panel, qtbot, tmp_path):
    """Before any models load, the worker hands the job no engine: refused, saying why."""
    panel.set_runner(lambda job: job(None))
    panel.set_prompt_file(prompts_file(tmp_path, n=1))
    assert panel.start_sweep()
    qtbot.waitUntil(lambda: not panel.sweeping, timeout=10_000)
    assert "no models to sweep with: load a model pair first" in panel.status.text()
