"""The string bridge (core.drafters.bridge.string_draft): a draft of another tokenizer drafts
greedily and its text, re-cut by the target's tokenizer, is the proposal with a one-hot q.
Exact as every drafter is: greedy equals the target's generate, whole sequences follow p at
T 1 and 0.7, and the sequence test catches the draft's own probabilities handed to verify()
in place of the one-hot q; the command line runs it with --vocab-bridge string."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from specviz.core.decoding.k_policy import PolicyConfig
from specviz.core.decoding.warp import SamplingConfig
from specviz.core.drafters.bridge import string_draft as string_bridge
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.trace.records import Settings
from tests.fixtures import make_model
from tests.test_drafters import (
    LEVEL,
    N_RUNS,
    PROMPTS,
    greedy_reference,
    run_sequences,
    sequence_pvalue,
)
from tests.test_tli import bridged, draft_tok  # noqa: F401 - the fixtures

STRING = DrafterConfig("string")
CONSTANT = PolicyConfig("constant")


def test_greedy_equals_target_generate(pair, bridged):  # noqa: F811
    drafted = accepted = 0
    for prompt in PROMPTS:
        engine = SpeculativeEngine(bridged, Settings(k=3, temperature=0, max_new_tokens=20),
                                   drafter=STRING, policy=CONSTANT)  # fmt: skip
        header = engine.prefill(prompt, calibrate=False)
        rounds = list(engine.run())
        ours = [t.id for r in rounds for t in r.tokens if t.emitted]
        prompt_ids = list(header.prompt_ids)
        assert ours == greedy_reference(bridged.target, prompt_ids, 20, pair.eos_token_id)
        assert header.drafter["kind"] == "string"
        drafted += sum(r.n_drafted for r in rounds)
        accepted += sum(r.n_accepted for r in rounds)
    assert drafted > 0


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_emitted_sequences_follow_p(pair, bridged, temperature):  # noqa: F811
    prompt_ids = pair.tokenizer(PROMPTS[0])["input_ids"]
    sampling = SamplingConfig(temperature=temperature)
    sequences, statuses = run_sequences(bridged, STRING, CONSTANT, 2, N_RUNS, 3, prompt_ids,
                                        seed=2, sampling=sampling)  # fmt: skip
    assert {"accepted", "rejected", "resampled"} <= {s for r in statuses for s in r}
    assert sequence_pvalue(bridged, prompt_ids, sequences, sampling) > LEVEL


def test_the_sequence_test_catches_the_drafts_own_q(bridged, monkeypatch):  # noqa: F811
    """Power: a q below one at the drafted token (a bridge that hands verify() a drafting
    probability although the proposal is a function of the context): the output leaves
    p."""
    real = string_bridge.StringDrafter.propose

    def claimed(self, ids, k, config, generator, keep_drafting):
        proposal = real(self, ids, k, config, generator, keep_drafting)
        q = proposal.q_rows(bridged.vocab_size)  # [k, V] (a copy)
        q[q == 1.0] = 0.01  # "drawn with probability 0.01": kept with min(1, 100 p)
        return dataclasses.replace(proposal, q=dict(zip(proposal.parents, q, strict=True)))

    monkeypatch.setattr(string_bridge.StringDrafter, "propose", claimed)
    prompt_ids = bridged.tokenizer(PROMPTS[0])["input_ids"]
    sampling = SamplingConfig(temperature=1.0)
    sequences, _ = run_sequences(bridged, STRING, CONSTANT, 2, N_RUNS, 3, prompt_ids, seed=2,
                                 sampling=sampling)  # fmt: skip
    assert sequence_pvalue(bridged, prompt_ids, sequences, sampling) < LEVEL


def test_a_proposal_is_the_drafts_text_cut_by_the_target(bridged):  # noqa: F811
    engine = SpeculativeEngine(bridged, Settings(k=4, temperature=0, max_new_tokens=8),
                               drafter=STRING, policy=CONSTANT)  # fmt: skip
    engine.prefill(PROMPTS[1], calibrate=False)
    drafter = engine.drafter
    ids = list(engine.ids)
    proposal = drafter.propose(ids, 4, SamplingConfig(temperature=0), engine.generator, None)
    d_ids = drafter.draft_ids(ids)
    with torch.inference_mode():  # the draft's greedy continuation, from a fresh pass
        out = drafter.model.generate(torch.tensor([d_ids]), max_new_tokens=4, do_sample=False,
                                     pad_token_id=0)  # fmt: skip
    text = drafter.draft_tok.decode(out[0, len(d_ids) :].tolist())
    assert proposal.tokens and text.startswith(bridged.tokenizer.decode(proposal.tokens))
    q = proposal.q_rows(bridged.vocab_size)  # [k, V]
    assert torch.equal(q.sum(-1), torch.ones(len(proposal.tokens)))


def test_the_command_line_runs_a_string_bridged_pair(tmp_path, pair_dirs, draft_tok, capsys):  # noqa: F811
    from specviz.cli.main import main

    other = tmp_path / "other"
    make_model(len(draft_tok), 1, 32, seed=6, eos=draft_tok.eos_token_id).save_pretrained(other)
    draft_tok.save_pretrained(other)
    code = main(["run", "--target", str(pair_dirs[0]), "--draft", str(other), "--vocab-bridge",
                 "string", "--prompt", "In the beginning", "--max-new-tokens", "6", "--k",
                 "2", "--temperature", "0"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "rounds" in out and "tokens/forward" in out


def test_a_draft_sharing_no_token_is_one_line_and_exit_2(tmp_path, pair_dirs, capsys):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from specviz.cli.main import main

    vocab = {f"never{i}": i for i in range(40)} | {"[UNK]": 40}
    words = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]", eos_token="[UNK]")
    other = tmp_path / "words"
    make_model(len(tok), 1, 32, seed=7, eos=tok.eos_token_id).save_pretrained(other)
    tok.save_pretrained(other)
    args = ["run", "--target", str(pair_dirs[0]), "--draft", str(other), "--vocab-bridge",
            "string", "--prompt", "In the beginning", "--max-new-tokens", "4"]  # fmt: skip
    try:
        code = main(args)
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and "no token in common" in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if "no token in common" in line]) == 1
