"""TLI, a draft whose tokenizer differs (core.drafters.bridge.tli, core.models.vocab_bridge): the
shared vocabulary; exact as every drafter is (greedy equals the target's generate, whole
sequences follow p at T 1 and 0.7, and the sequence test catches a q that is not the one
the token was drawn from); the draft's cache equals a fresh pass over its own cut of the
text; loading refuses a different tokenizer unless bridged, and says how."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from specviz.core.decoding.forward import forward
from specviz.core.decoding.k_policy import PolicyConfig
from specviz.core.decoding.kv_cache import crop_to
from specviz.core.decoding.warp import SamplingConfig
from specviz.core.drafters.bridge import tli
from specviz.core.drafters.registry import DrafterConfig, make_drafter
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.models.pair import ModelLoadError, load_pair
from specviz.core.models.vocab_bridge import VocabBridgeError, shared_ids
from specviz.core.trace.records import ModelInfo, Settings
from tests.fixtures import CORPUS, make_model, make_tokenizer
from tests.test_drafters import (
    LEVEL,
    N_RUNS,
    PROMPTS,
    fresh_logits,
    greedy_reference,
    run_sequences,
    sequence_pvalue,
)

TLI = DrafterConfig("tli")
CONSTANT = PolicyConfig("constant")
# Another corpus, another size: a byte-level BPE whose merges and ids differ from the
# target's (the fixture's 320 tokens), sharing the 256 bytes and some merges.
OTHER_CORPUS = [line.upper() + " " + line[::-1] for line in CORPUS]


@pytest.fixture(scope="module")
def draft_tok():
    return make_tokenizer(vocab_size=300, corpus=OTHER_CORPUS)


@pytest.fixture(scope="module")
def bridged(pair, draft_tok):
    """The fixture pair's target, its logits flattened (the fixture's are sharp: at T 1 the
    likeliest token has 0.97, and the sequence test would have no power), with a draft
    model of another tokenizer."""
    target = copy.deepcopy(pair.target)
    with torch.no_grad():
        target.lm_head.weight.mul_(0.4)  # tied to the input embeddings: another model
    draft = make_model(len(draft_tok), 1, 32, seed=5, eos=draft_tok.eos_token_id).eval()
    info = ModelInfo(name="other-tokenizer draft", path="", vocab_size=len(draft_tok),
                     params=draft.num_parameters(), dtype="float32", device="cpu")  # fmt: skip
    return dataclasses.replace(pair, target=target, draft=draft, draft_info=info,
                               draft_tokenizer=draft_tok)  # fmt: skip


def test_the_shared_vocabulary_is_the_tokens_of_one_string(pair, draft_tok):
    d_ids, t_ids = shared_ids(pair.tokenizer, draft_tok, pair.vocab_size, len(draft_tok))
    t_text = {i: s for s, i in pair.tokenizer.get_vocab().items()}
    d_text = {i: s for s, i in draft_tok.get_vocab().items()}
    assert [d_text[i] for i in d_ids.tolist()] == [t_text[i] for i in t_ids.tolist()]
    assert "<|endoftext|>" not in {d_text[i] for i in d_ids.tolist()}  # specials left out
    assert 256 <= len(d_ids) < min(pair.vocab_size, len(draft_tok))  # the bytes, not all
    assert pair.tokenizer.get_vocab() != draft_tok.get_vocab()


def test_no_token_in_common_is_refused_in_words(pair):
    class Disjoint:
        all_special_tokens: list[str] = []

        def get_vocab(self):
            return {f"never-{i}": i for i in range(10)}

    with pytest.raises(VocabBridgeError, match="no token in common"):
        shared_ids(pair.tokenizer, Disjoint(), pair.vocab_size, 10)


def test_the_model_drafter_refuses_a_bridged_pair(bridged):
    with pytest.raises(ValueError, match="--drafter tli"):
        make_drafter(DrafterConfig("model"), bridged)


def test_greedy_equals_target_generate(pair, bridged):
    drafted = 0
    for prompt in PROMPTS:
        engine = SpeculativeEngine(bridged, Settings(k=3, temperature=0, max_new_tokens=20),
                                   drafter=TLI, policy=CONSTANT)  # fmt: skip
        header = engine.prefill(prompt, calibrate=False)
        rounds = list(engine.run())
        ours = [t.id for r in rounds for t in r.tokens if t.emitted]
        prompt_ids = list(header.prompt_ids)
        assert ours == greedy_reference(bridged.target, prompt_ids, 20, pair.eos_token_id)
        assert header.drafter["kind"] == "tli" and header.drafter["shared_tokens"] >= 256
        drafted += sum(r.n_drafted for r in rounds)
    assert drafted > 0


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_emitted_sequences_follow_p(pair, bridged, temperature):
    prompt_ids = pair.tokenizer(PROMPTS[0])["input_ids"]
    sampling = SamplingConfig(temperature=temperature)
    sequences, statuses = run_sequences(bridged, TLI, CONSTANT, 2, N_RUNS, 3, prompt_ids,
                                        seed=2, sampling=sampling)  # fmt: skip
    assert {"accepted", "rejected", "resampled", "bonus"} <= {s for r in statuses for s in r}
    assert sequence_pvalue(bridged, prompt_ids, sequences, sampling) > LEVEL


def test_the_sequence_test_catches_a_q_of_other_tokens(bridged, monkeypatch):
    """Power: the bridge's own mistake, each shared token's q placed at its neighbour's
    target id (a map off by one; the tokens still drawn from the real q): the output leaves
    p. (Most of the fixture's shared tokens are the 256 bytes, at the same ids in both
    vocabularies, so a mistake that swaps draft and target ids would go unseen here.)"""
    real = tli.TliDrafter.propose

    def misplaced(self, ids, k, config, generator, keep_drafting):
        proposal = real(self, ids, k, config, generator, keep_drafting)
        rows = proposal.q_rows(self.vocab)  # [k, V]
        q = torch.zeros_like(rows)
        q[:, self.t_ids] = rows[:, self.t_ids.roll(1)]
        return dataclasses.replace(proposal, q=dict(zip(proposal.parents, q, strict=True)))

    monkeypatch.setattr(tli.TliDrafter, "propose", misplaced)
    prompt_ids = bridged.tokenizer(PROMPTS[0])["input_ids"]
    sampling = SamplingConfig(temperature=1.0)
    sequences, _ = run_sequences(bridged, TLI, CONSTANT, 2, N_RUNS, 3, prompt_ids, seed=2,
                                 sampling=sampling)  # fmt: skip
    assert sequence_pvalue(bridged, prompt_ids, sequences, sampling) < LEVEL


def test_the_draft_cache_equals_a_fresh_pass_over_its_cut(pair, bridged):
    """After every round the draft's cache is a fresh pass over the ids it says it holds,
    and those agree with its cut of the text but for the tail it re-cuts next round."""
    engine = SpeculativeEngine(bridged, Settings(k=4, seed=3, max_new_tokens=40), drafter=TLI,
                               policy=CONSTANT)  # fmt: skip
    engine.prefill(PROMPTS[1], calibrate=False)
    drafter, statuses = engine.drafter, set()
    for rnd in engine.run(max_rounds=12):
        statuses.update(t.status for t in rnd.tokens)
        cached = list(drafter.cached)
        assert drafter.cache.get_seq_length() == len(cached) > 0
        with torch.inference_mode():
            out = forward(drafter.model, cached[:1], drafter.cache, drafter.draft_vocab, 1)[0]
        crop_to(drafter.cache, len(cached))
        fresh = fresh_logits(drafter.model, cached + cached[:1], drafter.draft_vocab)
        torch.testing.assert_close(out, fresh, atol=1e-4, rtol=1e-4)
        prompt_cut = drafter.draft_ids(list(engine.ids)[: len(engine.ids) - len(rnd.tokens)])
        assert cached[: len(prompt_cut) - 1] == prompt_cut[:-1][: len(cached)]
        if engine.finished:
            break
    assert {"accepted", "rejected"} <= statuses


def test_loading_a_pair_of_two_tokenizers(tmp_path, pair_dirs, draft_tok):
    target_dir, _ = pair_dirs
    other = tmp_path / "other"
    make_model(len(draft_tok), 1, 32, seed=6, eos=draft_tok.eos_token_id).save_pretrained(other)
    draft_tok.save_pretrained(other)
    with pytest.raises(ModelLoadError, match="--vocab-bridge tli"):
        load_pair(str(target_dir), str(other))
    loaded = load_pair(str(target_dir), str(other), vocab_bridge="tli")
    assert loaded.draft_tokenizer is not None and loaded.vocab_size == loaded.target_info.vocab_size
    assert make_drafter(TLI, loaded).describe()["draft_vocab"] == len(draft_tok)
    same = load_pair(str(target_dir), str(pair_dirs[1]), vocab_bridge="tli")
    assert same.draft_tokenizer is None  # one tokenizer: nothing to bridge


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
            "tli", "--prompt", "In the beginning", "--max-new-tokens", "4"]  # fmt: skip
    try:
        code = main(args)
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and "no token in common" in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if "no token in common" in line]) == 1
