"""A drafter is one module and one registry entry: the command line, the Drafting box, the
wire format and the engine all take a new one from core.drafters.registry alone."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
import torch

from specviz.cli.drafting_options import add_drafter_options, drafting_from, pair_specs
from specviz.core.decoding.proposal import Proposal
from specviz.core.drafters import registry
from specviz.core.drafters.base import Drafter
from specviz.core.drafters.registry import DrafterConfig, make_drafter
from specviz.core.drafters.spec import DrafterParam, DrafterSpec
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.trace.records import EMITTED, ModelInfo, Settings
from specviz.remote.protocol import drafting_from_json, drafting_to_json
from tests.test_drafters import greedy_reference


class RepeatDrafter(Drafter):
    """Proposes the context's last token `times` times, one-hot (deterministic)."""

    kind = "repeat"

    def __init__(self, times: int, info: ModelInfo, vocab: int):
        self.times, self.info, self.vocab = times, info, vocab

    def describe(self):
        return {"kind": self.kind, "times": self.times}

    def propose(self, ids, k, config, generator, keep_drafting) -> Proposal:
        tokens = [ids[-1]] * min(k, self.times)
        q = torch.zeros((len(tokens), self.vocab))
        q[torch.arange(len(tokens)), torch.tensor(tokens, dtype=torch.long)] = 1.0
        return Proposal.chain(tokens, q, "k")

    def measure_ms(self, ids, n_tokens) -> float:
        return 0.001


def _build(params, pair) -> RepeatDrafter:
    info = dataclasses.replace(pair.target_info, name="repeat", params=0)
    return RepeatDrafter(params["times"], info, pair.vocab_size)


REPEAT = DrafterSpec(
    kind="repeat",
    label="repeat the last token",
    tip="Proposes the last token again",
    help="'repeat': the last token again",
    needs_draft_model=False,
    params=(DrafterParam("times", "Times", "repeat: how many copies", default=2, low=1, high=8),),
    build=_build,
    words=lambda params: f"the last token, {params['times']} times",
)


@pytest.fixture
def with_repeat(monkeypatch):
    monkeypatch.setitem(registry.SPECS, "repeat", REPEAT)


def test_the_command_line_offers_a_registered_drafter(with_repeat):
    parser = argparse.ArgumentParser()
    parser.add_argument("--pair"), parser.add_argument("--target"), parser.add_argument("--draft")
    add_drafter_options(parser)
    args = parser.parse_args(["--drafter", "repeat", "--times", "3", "--target", "/t"])
    drafter, _ = drafting_from(args)
    assert drafter == DrafterConfig("repeat", times=3)
    assert pair_specs(args, drafter) == ("/t", None)  # no draft model for it
    bad = parser.parse_args(["--drafter", "repeat", "--times", "9"])
    with pytest.raises(Exception, match="times must be an integer between 1 and 8"):
        drafting_from(bad)


def test_the_wire_and_the_header_carry_it(with_repeat):
    drafter = DrafterConfig("repeat", times=4)
    request = drafting_to_json(drafter, _policy())
    assert request["drafter"] == {"kind": "repeat", "times": 4}
    back, _ = drafting_from_json(request, (DrafterConfig(), _policy()))
    assert back == drafter
    assert (
        DrafterConfig.from_json({"kind": "repeat", "times": 99}, lenient=True).param("times") == 2
    )


def test_the_drafting_box_lists_it_with_its_parameter(with_repeat, qtbot):
    from specviz.gui.setup.drafting_box import DraftingBox, describe_drafter

    box = DraftingBox()
    qtbot.addWidget(box)
    box.drafter_combo.setCurrentIndex(box.drafter_combo.findData("repeat"))
    assert box.param_spins["times"].isEnabled() and not box.param_spins["ngram_max"].isEnabled()
    box.param_spins["times"].setValue(5)
    drafter, _ = box.drafting()
    assert drafter == DrafterConfig("repeat", times=5)
    assert describe_drafter(drafter) == "the last token, 5 times"


def test_the_engine_runs_it_exactly(with_repeat, pair):
    """Greedy with the new drafter equals the target's own greedy decoding."""
    target_only = dataclasses.replace(pair, draft=None, draft_info=None)
    assert isinstance(make_drafter(DrafterConfig("repeat"), target_only), RepeatDrafter)
    settings = Settings(k=3, temperature=0.0, max_new_tokens=12, seed=0)
    engine = SpeculativeEngine(
        target_only, settings, drafter=DrafterConfig("repeat", times=3), trace=False
    )
    engine.prefill("the the the the", calibrate=False)
    rounds = list(engine.run())
    assert rounds and engine.header.drafter == {"kind": "repeat", "times": 3}
    emitted = [t.id for r in rounds for t in r.tokens if t.status in EMITTED]
    prompt = pair.tokenizer("the the the the")["input_ids"]
    assert emitted == greedy_reference(pair.target, prompt, len(emitted), pair.eos_token_id)


def _policy():
    from specviz.core.decoding.k_policy import PolicyConfig

    return PolicyConfig()


def test_a_spec_says_whether_its_drafter_drafts_trees():
    """DrafterSpec.drafts_trees is the one declaration (issue 51): every drafter module's
    Drafter has its own propose_tree exactly when its spec says it drafts trees."""
    import importlib

    checked = []
    for spec in registry.SPECS.values():
        module = importlib.import_module(spec.build.__qualname__.split("'")[1])  # built_by(m)
        classes = [c for c in vars(module).values() if isinstance(c, type)]
        drafters = [c for c in classes if issubclass(c, Drafter) and c.kind == spec.kind]
        assert len(drafters) == 1, (spec.kind, drafters)
        can = drafters[0].propose_tree is not Drafter.propose_tree
        assert can == spec.drafts_trees, spec.kind
        checked.append(spec.kind)
    assert {"model", "lookup", "eagle3"} <= set(checked)


def test_the_engine_refuses_a_tree_to_a_chain_drafter(pair):
    settings = Settings(k=3, tree_width=2)
    with pytest.raises(ValueError, match="the lookup drafter drafts chains only"):
        SpeculativeEngine(pair, settings, drafter=DrafterConfig("lookup"))
