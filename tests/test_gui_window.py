"""The whole window on the small test models: step, run, pause, reset, errors, closing,
export -> open round trip, replay, CSV / plot exports, drag-and-drop, autosave restore."""

from __future__ import annotations

import csv
import json

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QTextCursor

from specviz.core.metrics.position_bars import position_bars
from specviz.core.trace.autosave import Autosaver
from specviz.core.trace.files import save, session_lines
from specviz.core.trace.serialize import dumps
from specviz.core.trace.session import Session
from specviz.gui import dialogs
from specviz.gui.main_window import MainWindow
from specviz.gui.session import replay as session_replay
from specviz.gui.session.loaded import Loaded
from specviz.gui.stream.token_view import status_of
from tests.fixtures import all_details, sample_header, sample_rounds, sample_session

TIMEOUT = 60_000


@pytest.fixture(autouse=True)
def quiet(monkeypatch, tmp_path):
    """No dialog ever blocks: questions are answered yes, messages recorded."""
    monkeypatch.setattr(dialogs, "AUTO_ANSWER", True)
    monkeypatch.setattr(dialogs, "shown", [])
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))


def make_window(qtbot, specs=None) -> MainWindow:
    window = MainWindow(specs)
    qtbot.addWidget(window)
    window.show()
    if specs is not None:
        qtbot.waitUntil(lambda: window.controller.models is not None, timeout=TIMEOUT)
    return window


@pytest.fixture
def window(qtbot, pair_dirs, pair):
    """A window on the test pair. The pair is loaded once per test run and handed to the
    worker (as its load slot would); test_model_load_error_* loads through the worker."""
    w = make_window(qtbot)
    target, draft = (str(d) for d in pair_dirs)
    w.controller.engine.link.pair = pair  # the worker thread is idle: nothing else touches it
    w.controller.engine.loaded.emit(  # as the worker says it
        Loaded(target, draft, pair.target_info, pair.draft_info, str(pair.device), pair.vocab_size)
    )
    w.controls.max_tokens_spin.setValue(48)
    yield w
    w.close_now()


def rounds(window) -> int:
    return len(window.session.rounds) if window.session is not None else 0


def step(qtbot, window, n: int = 1) -> None:
    """Press Step n times, each time until its round is drawn (in this or a new session)."""
    for _ in range(n):
        session, count = window.session, rounds(window)

        def drawn(session=session, count=count) -> bool:
            if window.session is session:
                return rounds(window) > count
            return rounds(window) >= 1

        window.actions_.step.trigger()
        qtbot.waitUntil(drawn, timeout=TIMEOUT)


def test_step_draws_every_view(qtbot, window):
    assert window.state == "ready" and "ready" in window.status.state.text()
    step(qtbot, window, 3)
    session = window.session
    assert window.state == "paused" and not window.controller.waiting
    assert session.header.baseline_ms_per_token > 0  # the step costs were measured
    assert window.stream.view.round_count == 3 and window.plots.rounds == 3
    last = session.rounds[-1]
    for i, event in enumerate(last.tokens):
        assert status_of(window.stream.view.char_format(2, i)) == event.status
    # the newest round is shown at its rejection, else its last accepted draft
    rejected = any(t.status == "rejected" for t in last.tokens)
    kind = "rejected" if rejected else "accepted" if last.n_accepted else "bonus"
    assert window.distribution.selected[0] == 2 and window.distribution.bars.kind == kind
    assert window.stream.slider.maximum() == 2
    assert "rounds: 3" in window.status.rounds.text()
    # click a token of the first round: every view follows
    window.stream.view.click(0, 0)
    assert window.distribution.selected == (0, 0)
    assert window.stream.slider.value() == 0 and window.plots.markers[0].value() == 1
    limits = window.distribution.row_limits()  # the rows that fit the panel
    assert window.distribution.bars == position_bars(session.rounds[0], 0, *limits)


def test_space_key_steps(qtbot, window):
    window.activateWindow()
    window.stream.view.setFocus()
    qtbot.keyClick(window.stream.view, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: rounds(window) >= 1, timeout=TIMEOUT)


def test_run_pause_reset_and_settings(qtbot, window):
    window.actions_.run.trigger()
    assert window.state == "running" and window.controller.busy_loading  # the prompt first
    assert window.actions_.run.text() == "Pause" and not window.actions_.step.isEnabled()
    qtbot.waitUntil(lambda: rounds(window) >= 3, timeout=TIMEOUT)
    assert window.state == "running"
    window.controls.k_spin.setValue(1)  # applies from the next round
    qtbot.waitUntil(
        lambda: window.session.rounds[-1].settings.k == 1 or window.session.finished,
        timeout=TIMEOUT,
    )
    window.actions_.run.trigger()  # pause
    assert window.state != "running"
    qtbot.waitUntil(lambda: not window.controller.waiting, timeout=TIMEOUT)
    count = len(window.session.rounds)
    qtbot.wait(200)
    assert len(window.session.rounds) == count  # nothing more was asked for
    assert window.state in ("paused", "finished")
    window.actions_.reset.trigger()
    assert window.session is None and window.state == "ready"
    assert window.stream.view.round_count == 0 and window.plots.rounds == 0


def test_run_until_finished(qtbot, window):
    window.controls.max_tokens_spin.setValue(12)
    window.toggle_run()
    qtbot.waitUntil(lambda: window.state == "finished", timeout=TIMEOUT)
    assert window.session.finished
    assert sum(r.n_emitted for r in window.session.rounds) <= 12
    count, asked = len(window.session.rounds), len(dialogs.shown)
    window.actions_.run.trigger()  # R again after the end: the banner, never a question
    window.actions_.step.trigger()
    assert window.state == "finished" and len(window.session.rounds) == count
    assert len(dialogs.shown) == asked and window.stream.banner.isVisible()
    assert "maximum number of new tokens" in window.stream.banner.text.text()
    window.stream.banner.new_button.click()  # New session: this one asks first
    assert dialogs.shown[-1][1] == "Discard this session?"
    assert window.session is None and window.state == "ready"
    assert not window.stream.banner.isVisible()
    step(qtbot, window)
    assert len(window.session.rounds) == 1


def test_changed_prompt_starts_a_new_session(qtbot, window):
    step(qtbot, window, 2)
    first = window.session.session_id
    window.controls.set_prompt("A fool and his money")
    step(qtbot, window)
    assert window.session.session_id != first and window.session.header.prompt.startswith("A fool")
    assert ("question", "Discard this session?") in [m[:2] for m in dialogs.shown]


def test_model_load_error_keeps_the_app_usable(qtbot, tmp_path, pair_dirs):
    window = make_window(qtbot)
    assert window.state == "no models"
    missing = str(tmp_path / "nowhere")
    window.load_models(missing, missing)
    qtbot.waitUntil(lambda: bool(dialogs.shown), timeout=TIMEOUT)
    kind, title, text = dialogs.shown[-1]
    assert (kind, title) == ("error", "Could not load the models") and "does not exist" in text
    assert (
        window.status.pair.text() == "models: none loaded" and window.state == "no models"
    )  # not the pair that failed
    window.step()  # without models: a message, nothing breaks
    assert dialogs.shown[-1][1] == "No models loaded"
    window.load_models(*(str(d) for d in pair_dirs))
    qtbot.waitUntil(lambda: window.controller.models is not None, timeout=TIMEOUT)
    step(qtbot, window)
    window.close_now()


def test_a_failed_load_leaves_the_loaded_pair_in_the_models_box(qtbot, window, tmp_path):
    loaded = window.controls.specs()
    missing = str(tmp_path / "nowhere")
    window.controls.set_specs(missing, missing)
    window.controls.load_button.click()
    qtbot.waitUntil(lambda: bool(dialogs.shown), timeout=TIMEOUT)
    assert dialogs.shown[-1][1] == "Could not load the models"
    assert window.controls.specs() == loaded and window.state == "ready"
    step(qtbot, window)  # the pair loaded before still runs


def test_close_while_running_joins_the_worker(qtbot, window):
    window.toggle_run()
    qtbot.waitUntil(lambda: rounds(window) >= 2, timeout=TIMEOUT)
    assert window.close()  # the unexported session asks first (answered yes here)
    assert window.controller.engine.thread.isFinished()
    assert dialogs.shown[-1][1] == "Discard this session?"


def test_close_refused_keeps_the_session_running(qtbot, window, monkeypatch):
    window.toggle_run()
    qtbot.waitUntil(lambda: rounds(window) >= 2, timeout=TIMEOUT)
    monkeypatch.setattr(dialogs, "AUTO_ANSWER", False)
    assert not window.close()
    assert window.isVisible() and window.controller.engine.thread.isRunning()
    assert window.state == "running"  # it carries on
    count = rounds(window)
    qtbot.waitUntil(lambda: rounds(window) > count or window.session.finished, timeout=TIMEOUT)
    window.toggle_run()


def test_export_open_round_trip_and_replay(qtbot, window, tmp_path):
    step(qtbot, window, 4)
    path = tmp_path / "session.jsonl"
    assert window.files.export_trace(path) and window.controller.exported
    window.stream.view.click(1, 0)
    live_state = view_state(window)

    replay = make_window(qtbot)  # no models at all
    assert replay.files.open_trace(path)
    assert replay.state == "replay" and replay.controller.models is None
    assert all_details(replay.session) == window.session.rounds  # identical records
    assert replay.session.header == window.session.header
    replay.stream.view.click(1, 0)
    assert view_state(replay) == live_state  # identical view state
    # stepping through a replay round by round
    replay.reset()
    assert replay.stream.view.round_count == 0 and replay.state == "replay"
    replay.step()
    assert len(replay.session.rounds) == 1 and replay.plots.rounds == 1
    replay.toggle_run()
    qtbot.waitUntil(lambda: len(replay.session.rounds) == 4, timeout=TIMEOUT)
    qtbot.waitUntil(lambda: replay.state == "replay", timeout=TIMEOUT)
    assert all_details(replay.session) == window.session.rounds
    again = tmp_path / "again.jsonl"
    assert replay.files.export_trace(again)  # the replayed rounds' lines, as they were read
    assert again.read_bytes() == path.read_bytes()
    replay.new_session()
    assert replay.state == "no models" and replay.session is None
    replay.close_now()


def view_state(window) -> dict:
    view = window.stream.view
    return {
        "text": view.toPlainText(),
        "formats": [
            status_of(view.char_format(r, i))
            for r in range(view.round_count)
            for i in range(len(view.round(r).tokens))
        ],
        "bars": window.distribution.bars,
        "summary": window.distribution.summary.text(),
        "round": window.stream.round_label.text(),
        "series": [  # NaN (no value) as None: NaN != NaN
            [None if v != v else v for v in window.plots.series(c)[1].tolist()]
            for c in window.plots.curves
        ],
        "lengths": list(window.plots.length_bars.opts["height"]),
        "status": (window.status.rounds.text(), window.status.acceptance.text()),
    }


def test_long_trace_is_drawn_in_slices(qtbot, tmp_path, monkeypatch):
    # Every slice runs out of time after its first batch: on a fast machine 1,500 rounds
    # could otherwise be drawn within one 50 ms slice, before open_trace returns.
    monkeypatch.setattr(session_replay, "SLICE_S", 0.0)
    session = sample_session(1500)
    rounds = session.rounds
    save(session, tmp_path / "long.jsonl")
    window = make_window(qtbot)
    messages = []
    original = window.status.set_busy
    window.status.set_busy = lambda m: (messages.append(m), original(m))
    assert window.files.open_trace(tmp_path / "long.jsonl")
    assert window.controller.drawing  # the window is back in the event loop before the end
    qtbot.waitUntil(lambda: not window.controller.drawing, timeout=TIMEOUT)
    assert all_details(window.session) == rounds and window.stream.view.round_count == 1500
    assert any(m.startswith("drawing round") for m in messages)
    assert window.plots.rounds == 1500 and window.distribution.selected[0] == 1499
    window.close_now()


def test_a_malformed_top_list_is_named_in_the_panel(qtbot, tmp_path):
    path = tmp_path / "bad.jsonl"
    save(Session(sample_header(), sample_rounds()), path)
    lines = path.read_text(encoding="utf-8").splitlines()
    obj = json.loads(lines[2])  # round 1
    obj["tokens"][0]["top"] = [[1, 0.5, True]]
    lines[2] = dumps(obj)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    window = make_window(qtbot)
    assert window.files.open_trace(path)  # the top-N lists are checked when first shown
    qtbot.waitUntil(lambda: not window.controller.drawing, timeout=TIMEOUT)
    window.select_position(1, 0)
    summary = window.distribution.summary.text()
    assert window.distribution.bars is None and "unreadable" in summary
    assert "line 3: field 'tokens[0].top'" in summary
    window.select_position(0, 0)  # the other rounds are unaffected
    limits = window.distribution.row_limits()
    assert window.distribution.bars == position_bars(sample_rounds()[0], 0, *limits)
    window.close_now()


def test_a_replay_is_complete_when_it_stops_drawing(qtbot, tmp_path, monkeypatch):
    """Every slice runs out of time (SLICE_S = 0): the last one must still draw the plots
    and select the last round before `drawing` turns False."""
    monkeypatch.setattr(session_replay, "SLICE_S", 0.0)
    shown_rounds = []
    rounds = sample_session(3 * session_replay.DRAW_BATCH + 7).rounds
    save(sample_session(len(rounds)), tmp_path / "long.jsonl")
    window = make_window(qtbot)
    original = window.status.set_figures
    window.status.set_figures = lambda stats, n, *running: (
        shown_rounds.append(n),
        original(stats, n, *running),
    )
    assert window.files.open_trace(tmp_path / "long.jsonl") and window.controller.drawing
    qtbot.waitUntil(lambda: not window.controller.drawing, timeout=TIMEOUT)
    assert window.distribution.selected[0] == len(rounds) - 1  # not None: selected
    # the status bar counted the rounds while they were drawn
    assert session_replay.DRAW_BATCH in shown_rounds and shown_rounds[-1] == len(rounds)
    assert window.plots.series(window.plots.curves[0])[0].size == len(rounds)
    window.close_now()


def test_csv_and_plot_exports(qtbot, window, tmp_path):
    step(qtbot, window, 3)
    assert window.files.export_csv(tmp_path / "rounds.csv")
    with open(tmp_path / "rounds.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["round"]) for r in rows] == [0, 1, 2]
    assert [int(r["accepted"]) for r in rows] == [r.n_accepted for r in window.session.rounds]
    for name in ("acceptance", "speedup", "accepted_length", "by_position", "distribution"):
        assert window.files.export_plot(name, tmp_path / f"{name}.png")
        assert window.files.export_plot(name, tmp_path / f"{name}.svg")
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
    assert not window.files.export_plot("speedup", tmp_path / "plot.bmp")
    assert dialogs.shown[-1][1] == "Could not export the plot"


def test_bad_traces_show_an_error(qtbot, tmp_path):
    window = make_window(qtbot)
    cases = {
        "empty.jsonl": b"",
        "binary.jsonl": b"\x00\x01\x02" * 100,
        "text.jsonl": b"hello world\n",
        "schema.jsonl": json.dumps({"type": "session", "schema": "specviz.trace/9"}).encode(),
    }
    # numbers out of any range (issue 14): a message, never a traceback or an abort
    for name, field, value in (
        ("p.jsonl", "p", 10**400),
        ("drafted.jsonl", "n_drafted", 10**400),
        ("accepted.jsonl", "n_accepted", -1),
        ("huge.jsonl", "n_accepted", 100_000_000),
    ):
        objs = [
            json.loads(line) for line in session_lines(Session(sample_header(), sample_rounds()))
        ]
        (objs[1]["tokens"][0] if field == "p" else objs[1])[field] = value
        cases[name] = "\n".join(json.dumps(obj) for obj in objs).encode()
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        assert not window.files.open_trace(tmp_path / name), name
        assert dialogs.shown[-1][1] == "Could not open the trace"
    assert window.state == "no models" and window.session is None


def test_contradicting_trace_is_refused(qtbot, window, tmp_path):
    step(qtbot, window, 2)
    path = tmp_path / "bad.jsonl"
    save(window.session, path)
    lines = path.read_text().splitlines()
    obj = json.loads(lines[1])
    obj["tokens"][0]["accept_prob"] = 0.123456  # not min(1, p/q)
    lines[1] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n")
    replay = make_window(qtbot)
    assert not replay.files.open_trace(path)
    assert "accept_prob" in dialogs.shown[-1][2]


def test_drop_a_trace_on_the_window(qtbot, window, tmp_path):
    step(qtbot, window, 2)
    path = tmp_path / "dropped.jsonl"
    window.files.export_trace(path)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    event = QDropEvent(
        QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
    )  # fmt: skip
    window.dropEvent(event)
    assert window.state == "replay" and len(window.session.rounds) == 2


def test_autosave_is_offered_back(qtbot, window, tmp_path):
    step(qtbot, window, 3)
    saved = Autosaver.find_restorable()  # the running session is on disk, round by round
    assert saved is not None
    rounds = list(window.session.rounds)
    window.controller.autosaver = None  # as if the app had crashed here: the file stays
    restored = make_window(qtbot)
    assert restored.files.offer_restore()
    assert restored.state == "replay" and all_details(restored.session) == rounds
    assert not restored.controller.exported  # leaving it asks before throwing it away
    restored.new_session()
    assert dialogs.shown[-1][1] == "Discard this session?"


# a second top-level window: the offscreen platform cannot raise it or pass size hints
@pytest.mark.qt_log_ignore("This plugin does not support")
def test_lab_gets_the_selected_position(qtbot, window):
    step(qtbot, window, 2)
    window.stream.view.click(0, 0)
    window.open_lab()
    lab = window.lab.lab
    with qtbot.waitSignal(window.controller.position_ready, timeout=TIMEOUT):
        lab.request_position.emit()
    assert lab.position is not None
    assert lab.position.p.shape == (window.controller.models.vocab_size,)
    assert lab.position.p.sum() == pytest.approx(1.0)


def test_a_message_never_hides_the_busy_indicator(qtbot):
    window = make_window(qtbot)
    window.status.showMessage("Replaying a long trace: Reset rewinds, Step / Run replay", 8000)
    window.status.set_busy("drawing round 5,400 of 100,000")
    assert window.status.busy_label.isVisible() and window.status.busy_bar.isVisible()
    window.status.set_busy("")
    assert not window.status.busy_bar.isVisible()
    window.close_now()


def test_continue_after_max_new_tokens_goes_on_in_the_same_session(qtbot, window, tmp_path):
    window.controls.max_tokens_spin.setValue(6)
    window.toggle_run()
    qtbot.waitUntil(lambda: window.state == "finished", timeout=TIMEOUT)
    session, count = window.session, len(window.session.rounds)
    if window.controller.finish_reason != "max_new_tokens":
        pytest.skip("the random test pair emitted end-of-text first")
    window.stream.banner.continue_button.click()
    # Continue runs on to the new limit (6 more tokens), not one round
    qtbot.waitUntil(lambda: window.state == "finished", timeout=TIMEOUT)
    assert window.session is session and window.controls.max_tokens_spin.value() == 12
    assert sum(r.n_emitted for r in session.rounds) >= 12 and len(session.rounds) > count
    assert session.rounds[count - 1].finish_reason is None  # it no longer ends there
    path = tmp_path / "continued.jsonl"
    assert window.files.export_trace(path)
    replay = make_window(qtbot)
    assert replay.files.open_trace(path), dialogs.shown[-1]  # valid: no finish mid-session
    replay.close_now()
    window.stream.banner.continue_button.click()  # as many again as first asked: 18
    qtbot.waitUntil(lambda: window.state == "finished", timeout=TIMEOUT)
    assert window.controls.max_tokens_spin.value() == 18
    window.new_session()  # back to the user's own limit
    assert window.controls.max_tokens_spin.value() == 6


def test_keys_that_drive_the_session_never_type_into_the_prompt(qtbot, window):
    window.activateWindow()
    prompt = window.controls.prompt()
    window.controls.prompt_edit.setFocus()
    window.controls.prompt_edit.moveCursor(QTextCursor.MoveOperation.End)
    qtbot.keyClick(window.controls.prompt_edit, Qt.Key.Key_Space)
    assert window.controls.prompt() == prompt + " " and window.session is None  # typed
    qtbot.keyClick(window.controls.prompt_edit, Qt.Key.Key_F10)  # F10 steps from anywhere
    qtbot.waitUntil(lambda: rounds(window) == 1, timeout=TIMEOUT)
    assert window.controls.prompt() == prompt + " "  # F10 typed nothing
    # a stray trailing space does not start a new session
    first = window.session.session_id
    step(qtbot, window)
    assert window.session.session_id == first and rounds(window) == 2


def test_first_launch_shows_every_fate_within_three_steps(qtbot):
    """The built-in pair, the first example prompt and the window's own defaults."""
    window = make_window(qtbot, ("builtin:tiny", "builtin:tiny"))
    step(qtbot, window, 3)
    seen = {t.status for r in window.session.rounds for t in r.tokens}
    assert seen == {"accepted", "rejected", "discarded", "resampled", "bonus"}
    window.close_now()


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_nothing_is_cut_at_1280_by_720(qtbot, tmp_path):
    """Geometry, not pixels: every panel inside the window, every plot's scene inside its
    view, every title narrower than its plot."""
    path = tmp_path / "t.jsonl"
    save(Session(sample_header(), sample_rounds()), path)
    window = make_window(qtbot)
    window.resize(1280, 720)
    assert window.files.open_trace(path)
    qtbot.waitUntil(lambda: not window.controller.drawing, timeout=TIMEOUT)
    window.select_position(0, 1)  # a rejection: every panel has something to show
    qtbot.wait(50)
    right = window.centralWidget().mapTo(window, window.centralWidget().rect().topRight()).x()
    assert right <= window.width()
    for widget in (window.stream, window.distribution, window.plots):
        corner = widget.mapTo(window, widget.rect().bottomRight())
        assert corner.x() <= window.width() and corner.y() <= window.height(), widget
    view = window.plots.graphics
    assert view.scene().itemsBoundingRect().width() <= view.viewport().width() + 1
    d = window.distribution
    d.show_position(window.session.rounds[1], 0)  # no resampling: the longest title
    for plot in (d.main, d.residual_plot, d.gauge):
        title = plot.getPlotItem().titleLabel
        text = title.item.sceneBoundingRect()
        assert text.left() >= 0 and text.right() <= plot.width(), title.text
    for plot in window.plots.plots.values():
        title = plot.titleLabel
        assert title.item.boundingRect().width() <= view.viewport().width(), title.text
    window.close_now()


def test_run_after_a_failed_round_starts_again(qtbot, window):
    step(qtbot, window)
    first = window.session.session_id
    window.controller.engine.link.session = None  # as a failed round leaves it (idle thread)
    window.controller.engine.error.emit("A round failed", "RuntimeError: boom")
    assert window.state == "error" and dialogs.shown[-1][1] == "A round failed"
    window.toggle_run()  # Run, not only Step, starts a new session from the prompt
    qtbot.waitUntil(
        lambda: window.session is not None and window.session.session_id != first,
        timeout=TIMEOUT,
    )
    qtbot.waitUntil(lambda: rounds(window) >= 1, timeout=TIMEOUT)
    window.toggle_run()


# a second top-level window: the offscreen platform cannot raise it or pass size hints
@pytest.mark.qt_log_ignore("This plugin does not support")
def test_tune_panel_follows_the_session(qtbot, window):
    step(qtbot, window)
    window.actions_.tune.trigger()  # opened mid-session: it starts from the rounds so far
    panel = window.tune.panel
    assert "no rounds yet" not in panel.summary.text()
    before = panel.summary.text()
    step(qtbot, window)
    assert panel.summary.text() != before  # fed each new round
    panel.k_box.setValue(7)
    panel.apply_button.click()
    assert window.controls.k_spin.value() == 7
    window.actions_.reset.trigger()
    assert panel.summary.text() == "no rounds yet"


@pytest.mark.qt_log_ignore("This plugin does not support")
def test_tune_sweeps_through_the_windows_engine_in_this_process(qtbot, window, tmp_path):
    """--engine thread: the sweep is a job on the window's worker, on its engine's pair
    (SessionHost.sweep); the session is paused meanwhile and goes on after."""
    step(qtbot, window)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("In the beginning God\n")
    window.actions_.tune.trigger()
    panel = window.tune.panel
    panel.set_prompt_file(str(prompts))
    panel.k_from.setValue(1)
    panel.k_to.setValue(2)
    panel.tokens.setValue(6)
    assert panel.start_sweep(), panel.status.text()
    qtbot.waitUntil(lambda: not panel.sweeping, timeout=TIMEOUT)
    assert panel.status.text().startswith("done: 2 of 2 runs")  # then the fastest K measured
    assert sorted(r.k for r in panel.result.runs) == [1, 2]
    step(qtbot, window)
    assert rounds(window) == 2


@pytest.mark.qt_log_ignore("This plugin does not support")
def test_tune_panel_opens_a_runs_trace_in_the_window(qtbot, tmp_path):
    from specviz.core.trace import files as tracefile

    window = make_window(qtbot)  # no models: a replay needs none
    path = tmp_path / "p001-bible-k02.jsonl"
    session = sample_session(6)
    tracefile.save(session, path)
    window.actions_.tune.trigger()
    window.tune.panel.open_trace.emit(str(path))  # what a per-prompt row's double-click sends
    assert window.state == "replay"
    assert window.session.header == session.header and len(window.session.rounds) == 6
    window.close_now()


def test_a_replay_names_its_file_ends_with_a_banner_and_says_why_step_does_nothing(
    qtbot, window, tmp_path
):
    """Opening a trace: the title names the file; once every round is shown the end banner
    says so (with the session's own end), Step and Run at the end point at it instead of
    doing nothing, and its Replay from the start rewinds."""
    step(qtbot, window, 3)
    path = tmp_path / "named.jsonl"
    assert window.files.export_trace(path)
    replay = make_window(qtbot)
    assert replay.files.open_trace(path)
    qtbot.waitUntil(lambda: not replay.controller.drawing, timeout=TIMEOUT)
    assert "named.jsonl (replay)" in replay.windowTitle()
    banner = replay.stream.banner
    assert (
        not banner.isHidden() and "End of the trace named.jsonl: all 3 rounds" in banner.text.text()
    )
    assert banner.rewind_button.isVisibleTo(banner) and not banner.continue_button.isVisibleTo(
        banner
    )
    replay.step()
    assert len(replay.session.rounds) == 3
    assert "last round" in replay.status.currentMessage()
    banner.rewind_requested.emit()
    assert replay.stream.view.round_count == 0 and banner.isHidden()
    replay.step()
    assert len(replay.session.rounds) == 1 and banner.isHidden()
    replay.new_session()
    assert replay.windowTitle() == "specviz \u2014 speculative decoding, round by round"
    replay.close_now()


def test_a_trace_opened_alone_loads_no_models(tmp_path, monkeypatch, qtbot):
    """`specviz trace.jsonl` replays without loading the default pair; naming a pair loads
    it (the window's loader is not reached here: the flag it gets is checked)."""
    from specviz.cli import main as cli_main
    from specviz.gui import app

    path = tmp_path / "t.jsonl"
    save(sample_session(2), path)
    seen = {}
    monkeypatch.setattr(app, "main", lambda *a, **kw: seen.update(kw) or 0)
    assert cli_main.main([str(path)]) == 0 and seen["load"] is False
    assert cli_main.main([str(path), "--pair", "tiny"]) == 0 and seen["load"] is True
    assert cli_main.main([]) == 0 and seen["load"] is True


def test_the_wheel_scrolls_the_setup_panel_unless_a_control_has_focus(qtbot, window):
    """At 1280x720 the Setup panel scrolls: a wheel over K's spin box (not focused) scrolls
    the panel and leaves K alone; focused, it changes K. Over a plot the wheel scrolls the
    plot column; with Ctrl it reaches the plot (its zoom)."""
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QApplication, QScrollArea

    window.resize(1280, 720)
    window.controls.setMinimumHeight(1400)  # as tall as on a small screen, whatever the font
    QApplication.processEvents()

    def wheel(widget, ctrl=False):
        modifiers = Qt.KeyboardModifier.ControlModifier if ctrl else Qt.KeyboardModifier.NoModifier
        event = QWheelEvent(QPointF(5, 5), QPointF(widget.mapToGlobal(QPoint(5, 5))),
                            QPoint(0, 0), QPoint(0, -120), Qt.MouseButton.NoButton, modifiers,
                            Qt.ScrollPhase.NoScrollPhase, False)  # fmt: skip
        QApplication.sendEvent(widget, event)

    spin = window.controls.k_spin
    bar = window.findChild(QScrollArea).verticalScrollBar()
    k, before = spin.value(), bar.value()
    wheel(spin)
    assert spin.value() == k and bar.value() > before
    spin.setFocus()
    qtbot.waitUntil(spin.hasFocus, timeout=TIMEOUT)
    wheel(spin)
    assert spin.value() != k
    view = window.plots.graphics
    seen = []
    view.wheelEvent = lambda event: seen.append(event.modifiers())
    wheel(view.viewport())
    assert seen == []
    wheel(view.viewport(), ctrl=True)
    assert len(seen) == 1


def test_status_messages_fit_at_1280x720(qtbot, window):
    """The cost figures are cut to a width (whole on hover) and give way to a message: at
    1280 pixels a message's whole text has room beside the other figures."""
    from PySide6.QtWidgets import QApplication, QLabel

    window.resize(1280, 720)
    step(qtbot, window, 2)
    status = window.status
    status.cost.setText("speedup 1.23x [1.01, 1.45] · " * 8)
    QApplication.processEvents()
    assert status.cost.width() <= status.cost.max_width + 2
    assert status.cost.full_text in status.cost.toolTip()
    message = "The replay is at its last round: Replay from the start (Reset) or Leave it"
    status.showMessage(message, 5000)
    QApplication.processEvents()
    assert status.cost.isHidden()
    taken = sum(w.width() for w in status.findChildren(QLabel) if w.isVisible()
                and w is not status.cost)  # fmt: skip
    assert status.fontMetrics().horizontalAdvance(message) + taken < status.width()
    status.clearMessage()
    assert not status.cost.isHidden()


def test_after_choosing_an_old_round_follow_the_latest_comes_back(qtbot, window):
    step(qtbot, window, 3)
    follow = window.stream.follow_button
    assert follow.isHidden()
    window.stream.view.click(0, 0)  # an old round: the panel stays on it
    assert not follow.isHidden()
    step(qtbot, window)
    assert window.distribution.selected[0] == 0
    follow.click()
    assert follow.isHidden() and window.distribution.selected[0] == 3
    step(qtbot, window)
    assert window.distribution.selected[0] == 4  # following again


def test_steps_pressed_while_a_round_is_computed_follow_it(qtbot, window):
    """Three Steps in a row, faster than the rounds: each gives its round (and says so),
    none is dropped."""
    step(qtbot, window)
    before = rounds(window)
    for _ in range(3):
        window.step()
    assert "more Step" in window.status.currentMessage()
    qtbot.waitUntil(lambda: rounds(window) == before + 3, timeout=TIMEOUT)
    qtbot.wait(200)
    assert rounds(window) == before + 3 and window.state == "paused"


def test_the_window_takes_the_first_sessions_settings_from_the_command_line(monkeypatch, qtbot):
    """`specviz --k 6 --seed 9 --temperature 0.5 --prompt ...` fills the Setup panel; what
    is not given keeps the window's defaults (seed 1 on first launch); a bad value exits 2
    before any window opens."""
    from specviz.cli import main as cli_main
    from specviz.gui import app

    seen = {}
    monkeypatch.setattr(app, "main", lambda *a, **kw: seen.update(kw) or 0)
    args = ["--k", "6", "--seed", "9", "--temperature", "0.5", "--prompt", "Once upon"]
    assert cli_main.main([*args, "--verifier", "block"]) == 0
    s = seen["settings"]
    assert (s.k, s.seed, s.temperature, s.verifier, seen["prompt"]) == (
        6,
        9,
        0.5,
        "block",
        "Once upon",
    )
    assert cli_main.main(["--k", "6"]) == 0 and seen["settings"].seed == 1
    assert cli_main.main([]) == 0 and seen["settings"] is None and seen["prompt"] is None
    assert cli_main.main(["--k", "40"]) == 2
    assert cli_main.main(["--prompt", "  "]) == 2
    window = MainWindow(None, autosave=False)
    qtbot.addWidget(window)
    window.controls.set_settings(s)  # what app.main does with them
    assert window.controls.settings().k == 6 and window.controls.settings().verifier == "block"


def test_view_and_help_menus(qtbot, window):
    """F1 lists the keys; Output only shows the emitted text without drafts; Ctrl +/- scale
    the text; the dark palette darkens the panels and keeps the fates' colours; the status
    bar says where the engine runs."""
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QApplication

    menu = window.view_menu
    lines = menu.shortcut_lines()
    assert any(line.startswith("F10") and "Step" in line for line in lines)
    assert any(line.startswith("F1 ") and "Keyboard shortcuts" in line for line in lines)
    menu.shortcuts.trigger()
    assert dialogs.shown[-1][1] == "Keyboard shortcuts" and "F5" in dialogs.shown[-1][2]
    step(qtbot, window, 3)
    menu.output_only.setChecked(True)
    stream = window.stream
    assert stream.output.isVisibleTo(window) and not stream.view.isVisibleTo(window)
    assert stream.output.toPlainText() == window.session.text
    discarded = [t.text for r in window.session.rounds for t in r.tokens if not t.emitted]
    assert discarded  # the stream has drafts the output leaves out
    step(qtbot, window)
    assert stream.output.toPlainText() == window.session.text  # follows new rounds
    menu.output_only.setChecked(False)
    assert stream.view.isVisibleTo(window)
    size = stream.view.document().defaultFont().pointSizeF()
    menu.text_size(+1)
    assert stream.view.document().defaultFont().pointSizeF() > size
    menu.text_size(0)
    assert stream.view.document().defaultFont().pointSizeF() == pytest.approx(size)
    light = QApplication.palette().color(QPalette.ColorRole.Base).lightness()
    menu.dark_action.setChecked(True)
    assert QApplication.palette().color(QPalette.ColorRole.Base).lightness() < light
    menu.dark_action.setChecked(False)
    assert QApplication.palette().color(QPalette.ColorRole.Base).lightness() == light
    assert window.status.engine.text() == "engine: this process"
