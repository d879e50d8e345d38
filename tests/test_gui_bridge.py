"""A pair whose tokenizers differ in the window (issue 35): it opens with --vocab-bridge in
both engine modes (the pair in this process, and the default child `specviz serve`, which
must be given the bridge), and under the stream the shown round's draft pieces stand above
the target's tokens, the columns where the two cuts differ tinted, as plain text."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtGui import QColor, QTextCursor
from PySide6.QtWidgets import QWidget

from specviz.core.decoding.k_policy import PolicyConfig
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.models.pair import LoadOptions
from specviz.core.trace.rounds import with_extras
from specviz.gui import dialogs, palette
from specviz.gui.main_window import MainWindow
from specviz.gui.session.remote_link import child_args, remote_engine_thread
from specviz.gui.stream.cut_view import DIVIDER, LABELS, CutView
from tests.fixtures import make_model
from tests.test_bridge_trace import UPPER, bridged_session
from tests.test_tli import bridged, draft_tok  # noqa: F401 - the fixtures

TIMEOUT = 60_000
PROMPT = "In the beginning God created the heaven and the earth."


@pytest.fixture(autouse=True)
def quiet(monkeypatch, tmp_path):
    monkeypatch.setattr(dialogs, "AUTO_ANSWER", True)
    monkeypatch.setattr(dialogs, "shown", [])
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def other_draft(tmp_path_factory, draft_tok):  # noqa: F811
    """A draft model folder whose tokenizer is not the target's (tests/test_tli.py's)."""
    folder = tmp_path_factory.mktemp("other-draft")
    make_model(len(draft_tok), 1, 32, seed=6, eos=draft_tok.eos_token_id).save_pretrained(folder)
    draft_tok.save_pretrained(folder)
    return str(folder)


def test_the_child_engine_is_given_the_bridge():
    assert child_args(LoadOptions(vocab_bridge="string")) == ["--vocab-bridge", "string"]
    assert child_args(LoadOptions(vocab_bridge="tli")) == ["--vocab-bridge", "tli"]
    assert child_args(LoadOptions()) == []


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_a_bridged_pair_opens_in_the_window(qtbot, pair_dirs, other_draft, mode):
    engine = None
    if mode == "process":  # the window's default: its engine in a child process
        engine = remote_engine_thread()
        engine.worker.calibrate = False
    drafting = (DrafterConfig("string"), PolicyConfig())
    window = MainWindow((str(pair_dirs[0]), other_draft), engine=engine, drafting=drafting,
                        load_options=LoadOptions(vocab_bridge="string"))  # fmt: skip
    qtbot.addWidget(window)
    window.show()
    try:
        qtbot.waitUntil(lambda: window.controller.models is not None, timeout=TIMEOUT)
        assert not dialogs.shown, dialogs.shown
        window.controls.set_prompt(PROMPT)
        window.controls.max_tokens_spin.setValue(12)
        window.step()
        qtbot.waitUntil(lambda: window.session is not None and len(window.session.rounds) > 0,
                        timeout=TIMEOUT)  # fmt: skip
        assert window.session.header.drafter["kind"] == "string"
        cuts, rnd = window.stream.cuts, window.session.rounds[-1]
        qtbot.waitUntil(lambda: cuts.rows[0] != "", timeout=TIMEOUT)  # the round is shown
        assert cuts.isVisible() and shown_pieces(cuts.rows[0]) == list(rnd.draft_pieces.text)
        assert shown_pieces(cuts.rows[1]) == [t.text for t in rnd.tokens[: rnd.n_drafted]]
    finally:
        window.close_now()


def shown_pieces(row: str) -> list[str]:
    """The pieces of a CutView row, as the view separates them (plain ASCII texts)."""
    return [p.rstrip(" ") for p in row[len(LABELS[0]) :].split(DIVIDER)[1:]]


def background(view: CutView, position: int) -> QColor:
    cursor = QTextCursor(view.text.document())
    cursor.setPosition(position + 1)
    return cursor.charFormat().background().color()


def cut_view(qtbot) -> tuple[QWidget, CutView]:
    """A CutView in a window never shown (its state, not pixels, is what is asserted)."""
    holder = QWidget()
    qtbot.addWidget(holder)
    return holder, CutView(holder)


def test_the_cut_view_marks_where_the_cuts_differ(qtbot, bridged):  # noqa: F811
    session = bridged_session(bridged, "string", prompt=UPPER)
    _holder, view = cut_view(qtbot)
    view.clear(session.header)
    assert not view.isHidden()  # the session's draft has a tokenizer of its own
    rnd = next(r for r in session.rounds if r.n_drafted)
    view.show_round(rnd)
    pieces = rnd.draft_pieces
    assert view.rows[0].startswith(LABELS[0]) and view.rows[1].startswith(LABELS[1])
    assert len(view.rows[0]) == len(view.rows[1])  # columns line up
    assert shown_pieces(view.rows[0]) == list(pieces.text)
    assert shown_pieces(view.rows[1]) == [t.text for t in rnd.tokens[: rnd.n_drafted]]
    groups = pieces.groups(rnd.n_drafted)
    differ = [g for g in groups if (g[1] - g[0], g[3] - g[2]) != (1, 1)]
    assert differ and len(view.marked) == len(differ)  # "EN" over "E", "N"
    assert view.text.toPlainText() == "\n".join(view.rows)
    tint, line = QColor(palette.CUT_DIFFERS), len(view.rows[0]) + 1
    for start, end in view.marked:
        for at in (start, end - 1, line + start, line + end - 1):  # both lines, tinted
            assert background(view, at) == tint
    unmarked = [i for i in range(len(LABELS[0]), len(view.rows[0]))
                if not any(s <= i < e for s, e in view.marked)]  # fmt: skip
    assert all(background(view, i) != tint for i in unmarked)
    assert f"differ in {len(differ)} place" in view.title.text()
    view.clear(dataclasses.replace(session.header, drafter={"kind": "model"}))
    assert view.isHidden()  # one tokenizer: nothing to show


def test_a_models_pieces_are_plain_text(qtbot, bridged):  # noqa: F811
    session = bridged_session(bridged, "string", prompt=UPPER, rounds=1)
    rnd = session.rounds[0]
    hostile = ["<img src=x><b>bold</b>", "a\nb", "", *rnd.draft_pieces.text[3:]]
    rnd = with_extras(rnd, draft_pieces={**rnd.draft_pieces.to_json(), "text": hostile})
    _holder, view = cut_view(qtbot)
    view.clear(session.header)
    view.show_round(rnd)
    first = view.text.toPlainText().split("\n")[0]
    assert "<img src=x><b>bold</b>" in first and "a\u21b5b" in first and "\u2205" in first
