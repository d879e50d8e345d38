"""Settings.ignore_eos: a session that goes on past end-of-text (issue 15 item 2)."""

from __future__ import annotations

import dataclasses

from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.trace.files import load, save
from specviz.core.trace.records import Settings
from specviz.core.trace.session import Session


def test_ignore_eos_is_written_and_read_back(pair, tmp_path):
    settings = Settings(k=3, seed=1, max_new_tokens=12, ignore_eos=True)
    engine = SpeculativeEngine(pair, settings)
    session = Session(engine.prefill("the cat", calibrate=False))
    for rnd in engine.run():
        session.append(rnd)
    assert session.rounds[-1].finish_reason == "max_new_tokens"  # never "eos"
    save(session, tmp_path / "t.jsonl")
    back = load(tmp_path / "t.jsonl")
    assert back.header.settings.ignore_eos and back.rounds[0].settings.ignore_eos
    assert dataclasses.replace(back.header.settings, ignore_eos=False) == Settings(
        k=3, seed=1, max_new_tokens=12
    )
