"""A pair whose tokenizers differ in the window (issue 35): it opens with --vocab-bridge in
both engine modes (the pair in this process, and the default child `specviz serve`, which
must be given the bridge), and its rounds carry the draft's own pieces."""

from __future__ import annotations

import pytest

from specviz.core.decoding.k_policy import PolicyConfig
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.models.pair import LoadOptions
from specviz.gui import dialogs
from specviz.gui.main_window import MainWindow
from specviz.gui.session.remote_link import child_args, remote_engine_thread
from tests.fixtures import make_model
from tests.test_tli import draft_tok  # noqa: F401 - the fixture

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
    finally:
        window.close_now()
