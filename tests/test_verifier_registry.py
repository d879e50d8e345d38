"""A verification rule is one module and one registry entry: the command line, the window's
Verifier combo, the trace's validation and the engine all take a new one from
core.trace.verifiers alone. The rule here is a test file's: the token-wise rule's steps, each
counted, registered under a name of its own."""

from __future__ import annotations

import dataclasses

import pytest

from specviz.core.decoding.verifier import TokenVerifier
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.trace import files as tracefile
from specviz.core.trace import verifiers
from specviz.core.trace.records import EMITTED, Settings
from tests.test_drafters import greedy_reference

JUDGED: list[int] = []


class CountingVerifier(TokenVerifier):
    """Leviathan's rule, counting the drafts it judges."""

    def verdict(self, p, q, drafts, generator, settings):
        JUDGED.append(len(drafts))
        return super().verdict(p, q, drafts, generator, settings)


COUNTED = verifiers.VerifierSpec(
    "counted", True, "the token-wise rule, its drafts counted", CountingVerifier,
    label="counted (a test's)",
)  # fmt: skip


@pytest.fixture
def with_counted(monkeypatch):
    monkeypatch.setitem(verifiers.SPECS, "counted", COUNTED)


def test_the_command_line_runs_it(with_counted, pair_dirs, tmp_path, capsys):
    from specviz.cli.main import main

    JUDGED.clear()
    trace = tmp_path / "counted.jsonl"
    code = main(["run", "--target", str(pair_dirs[0]), "--draft", str(pair_dirs[1]),
                 "--verifier", "counted", "--prompt", "In the beginning", "--k", "2",
                 "--max-new-tokens", "6", "--trace", str(trace)])  # fmt: skip
    assert code == 0 and JUDGED  # judged by it
    back = tracefile.load(trace)
    assert back.header.settings.verifier == "counted" and back.warnings == []


def test_the_window_lists_it(with_counted, qtbot):
    from specviz.gui.setup.controls import Controls

    controls = Controls()
    qtbot.addWidget(controls)
    combo = controls.verifier_combo
    assert combo.itemText(combo.findData("counted")) == "counted (a test's)"


def test_an_unregistered_name_is_refused_naming_the_rules(with_counted):
    with pytest.raises(ValueError, match="unknown verifier 'uncounted'.*counted"):
        Settings(verifier="uncounted").validate()


def test_the_engine_judges_by_it_exactly(with_counted, pair):
    JUDGED.clear()
    settings = Settings(k=3, temperature=0.0, max_new_tokens=12, verifier="counted")
    engine = SpeculativeEngine(pair, settings, trace=False)
    engine.prefill("In the beginning", calibrate=False)
    rounds = list(engine.run())
    assert JUDGED == [r.n_drafted for r in rounds if r.n_drafted]  # every round, by it
    emitted = [t.id for r in rounds for t in r.tokens if t.status in EMITTED]
    prompt = pair.tokenizer("In the beginning")["input_ids"]
    assert emitted == greedy_reference(pair.target, prompt, len(emitted), pair.eos_token_id)
    assert dataclasses.replace(settings).verifier == engine.header.settings.verifier
