"""The EAGLE-3 drafter (core.drafters.eagle3.drafter): a head on the target's hidden states.

Exact as every drafter must be: greedy chains and trees equal the target's greedy decoding;
whole sampled sequences (chain and tree, T 1 and 0.7) follow the target's p; after every
round the head's cache equals a fresh head pass over the target's fresh states. The head
here is random, for the fixture's random target, with a draft vocabulary of half the ids
(d2t), so q is zero on the other half.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import DynamicCache, LlamaConfig

from specviz.core.decoding.warp import SamplingConfig
from specviz.core.drafters.eagle3.format import HeadError, build_head, save_head
from specviz.core.drafters.eagle3.head import Eagle3Head, HeadConfig
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.trace.records import Settings
from tests.test_drafters import (
    PROMPTS,
    greedy_reference,
    looping_prompt,
    run_sequences,
    sequence_pvalue,
)
from tests.test_engine import assert_caches_fresh
from tests.test_sampling import LEVEL

LAYERS = (0, 1)
N_RUNS = 400  # sessions per case: the random head is seldom accepted, and each fate must occur


def target_only(pair):
    return dataclasses.replace(pair, draft=None, draft_info=None)


def random_head(pair, draft_vocab: int | None = None, seed: int = 0) -> Eagle3Head:
    target = pair.target
    hidden, vocab = target.config.n_embd, pair.vocab_size
    layer = LlamaConfig(hidden_size=hidden, num_attention_heads=2, num_key_value_heads=1,
                        head_dim=hidden // 2, intermediate_size=2 * hidden, vocab_size=vocab,
                        num_hidden_layers=1)  # fmt: skip
    draft_vocab = draft_vocab or vocab
    config = HeadConfig(layer=layer, aux_layers=LAYERS, draft_vocab=draft_vocab,
                        target_vocab=vocab, target_hidden=hidden)  # fmt: skip
    torch.manual_seed(seed)
    head = Eagle3Head(config)
    ids = torch.arange(0, vocab, vocab // draft_vocab)[:draft_vocab]  # every other id
    with torch.no_grad():
        head.d2t.copy_(ids - torch.arange(draft_vocab))
        head.lm_head.weight.copy_(target.get_output_embeddings().weight[ids])
        for p in head.parameters():
            if p.dim() == 2 and p is not head.lm_head.weight:
                p.normal_(0, 0.2)
    return head


@pytest.fixture(scope="module")
def head_dir(pair, tmp_path_factory):
    folder = tmp_path_factory.mktemp("head") / "eagle3"
    save_head(random_head(pair, pair.vocab_size // 2), folder, verifier="fixture",
              dtype=torch.float32)  # fmt: skip
    return folder


def eagle(head_dir) -> DrafterConfig:
    return DrafterConfig("eagle3", head=str(head_dir))


@pytest.mark.parametrize("width", [1, 3])
def test_greedy_equals_target_generate(pair, head_dir, width):
    used = target_only(pair)
    for prompt in ("the cat and the dog and the cat", "A fool and his money"):
        settings = Settings(k=3, temperature=0, max_new_tokens=16, tree_width=width,
                            tree_budget=9)  # fmt: skip
        engine = SpeculativeEngine(used, settings, drafter=eagle(head_dir))
        header = engine.prefill(prompt, calibrate=False)
        rounds = list(engine.run())
        ours = [t.id for r in rounds for t in r.tokens if t.emitted]
        assert ours == greedy_reference(pair.target, list(header.prompt_ids), 16,
                                        pair.eos_token_id)  # fmt: skip
        assert header.drafter == {"kind": "eagle3", "head": str(head_dir)}
        assert sum(r.n_drafted for r in rounds) >= len(rounds) > 1  # the head drafted


# A chain at T 0.7 and a tree at T 1 here; tests/test_eagle3_builtin.py runs the other two
# (a chain at T 1, a tree at T 0.7) on builtin:tiny's trained head.
CASES = [(1, 0.7), (3, 1.0)]


@pytest.mark.parametrize("width,temperature", CASES)
def test_sequences_follow_the_target(pair, head_dir, width, temperature):
    used = target_only(pair)
    prompt_ids = looping_prompt(pair)
    sampling = SamplingConfig(temperature=temperature)
    if width == 1:
        sequences, statuses = run_sequences(used, eagle(head_dir), None, 2, N_RUNS, 3,
                                            prompt_ids, seed=2, sampling=sampling)  # fmt: skip
        seen = {s for run in statuses for s in run}
        assert {"accepted", "rejected", "resampled", "bonus"} <= seen, seen
    else:
        settings = Settings(k=2, temperature=temperature, max_new_tokens=3, tree_width=width,
                            tree_budget=9)  # fmt: skip
        engine = SpeculativeEngine(used, settings, trace=False, drafter=eagle(head_dir))
        gen = torch.Generator().manual_seed(2)
        sequences = []
        for _ in range(N_RUNS):
            engine.prefill("", prompt_ids=prompt_ids, calibrate=False)
            engine.generator = gen
            rounds = list(engine.run())
            sequences.append(tuple(t.id for r in rounds for t in r.tokens if t.emitted))
    assert sequence_pvalue(pair, prompt_ids, sequences, sampling) > LEVEL


def fresh_head_cache(drafter, target, ids) -> DynamicCache:
    """The head's cache from scratch: the target's fresh states over ids[:-1], the pairs
    (x_{j+1}, h_j) for j < drafter.fed."""
    with torch.inference_mode():
        out = target(input_ids=torch.tensor([ids[:-1]]), output_hidden_states=True)
        states = torch.cat([out.hidden_states[i][0] for i in drafter.target_layers], -1)
        cache = DynamicCache()
        n = drafter.fed
        drafter._step(ids[1 : n + 1], drafter.head.project(states[:n]), list(range(1, n + 1)),
                      cache=cache)  # fmt: skip
    return cache, states


@pytest.mark.parametrize("width", [1, 3])
def test_the_heads_cache_equals_a_fresh_pass_after_every_round(pair, head_dir, width):
    used = target_only(pair)
    # T 2 on the looping prompt: the random head's drafts are accepted, all K of them too
    settings = Settings(k=3, temperature=2.0, seed=0, max_new_tokens=200, tree_width=width,
                        tree_budget=9)  # fmt: skip
    engine = SpeculativeEngine(used, settings, drafter=eagle(head_dir))
    engine.prefill("", prompt_ids=looping_prompt(pair), calibrate=False)
    fates = set()
    for rnd in engine.run(max_rounds=30):
        fates.update(t.status for t in rnd.tokens)
        drafter = engine.drafter
        cache, states = fresh_head_cache(drafter, pair.target, engine.ids)
        assert drafter.cache.get_seq_length() == drafter.fed
        torch.testing.assert_close(drafter.cache.layers[0].keys, cache.layers[0].keys,
                                   atol=1e-4, rtol=1e-4)  # fmt: skip
        # the states handed over and not fed yet are the fresh ones at those positions
        torch.testing.assert_close(drafter.pending, states[drafter.fed :], atol=1e-4, rtol=1e-4)
        if engine.finished:
            break
    assert {"accepted", "rejected", "bonus"} <= fates, fates


def test_the_target_cache_stays_exact(pair, head_dir):
    used = target_only(pair)
    engine = SpeculativeEngine(used, Settings(k=3, temperature=1.0, seed=5, max_new_tokens=30),
                               drafter=eagle(head_dir))  # fmt: skip
    engine.prefill("In the beginning", calibrate=False)
    for _ in engine.run(max_rounds=6):
        assert_caches_fresh(engine, used)  # the target's (the head's: the test above)


# ------------------------------------------------------------------------- the format


def broken(head_dir, tmp_path, edit_config=None, edit_state=None):
    import json
    import shutil

    from safetensors.torch import load_file, save_file

    folder = tmp_path / "broken"
    shutil.copytree(head_dir, folder)
    if edit_config:
        config = json.loads((folder / "config.json").read_text())
        edit_config(config)
        (folder / "config.json").write_text(json.dumps(config))
    if edit_state:
        state = load_file(str(folder / "model.safetensors"))
        edit_state(state)
        save_file(state, str(folder / "model.safetensors"))
    return folder


def _nan(state):
    state["fc.weight"][0, 0] = float("nan")


def _far(state):
    state["d2t"][3] = 10**6


def _shape(state):
    state["fc.weight"] = state["fc.weight"][:, :-1].contiguous()


def _no_map(state):
    del state["d2t"]


BAD = {
    "aux layers": (lambda c: c.update(eagle_aux_hidden_state_layer_ids=[0, 5]), None,
                   "outside the target's 2 layers"),
    "NaN": (None, _nan, "NaN"),
    "d2t range": (None, _far, "d2t maps draft ids outside"),
    "shape": (None, _shape, "fc.weight has shape"),
    "no d2t": (None, _no_map, "no d2t map"),
    "not eagle3": (lambda c: c.update(speculators_model_type="medusa"), None, "not 'eagle3'"),
    "hidden": (lambda c: c.update(target_hidden_size=128), None, "hidden size 128"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_bad_heads_are_refused_in_one_line(pair, head_dir, tmp_path, case):
    edit_config, edit_state, words = BAD[case]
    folder = broken(head_dir, tmp_path, edit_config, edit_state)
    with pytest.raises(HeadError) as err:
        build_head(folder, 2, pair.target.config.n_embd, pair.vocab_size)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_huge_config_is_refused_unread(head_dir, tmp_path):
    folder = broken(head_dir, tmp_path)
    with open(folder / "config.json", "r+b") as f:  # 2 GB, sparse: never read
        f.truncate(2 << 30)
    with pytest.raises(HeadError, match="bytes"):
        build_head(folder, 2, 64, 100)


def test_the_authors_layout_loads_as_speculators(pair, head_dir, tmp_path):
    def original(config):
        layer = config.pop("transformer_layer_config")
        config.clear()
        config.update(layer, architectures=["LlamaForCausalLMEagle3"],
                      draft_vocab_size=pair.vocab_size // 2,
                      eagle_aux_hidden_state_layer_ids=list(LAYERS))  # fmt: skip

    def midlayer(state):
        for key in [k for k in state if k.startswith("layers.0.")]:
            state[key.replace("layers.0.", "midlayer.")] = state.pop(key)

    folder = broken(head_dir, tmp_path, original, midlayer)
    a, _, _ = build_head(head_dir, 2, pair.target.config.n_embd, pair.vocab_size)
    b, _, notes = build_head(folder, 2, pair.target.config.n_embd, pair.vocab_size)
    assert any("midlayer" in n for n in notes)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert ka == kb and torch.equal(va, vb)


def test_a_head_stored_without_lm_head_takes_the_targets_rows(pair, tmp_path):
    """A copy of a built-in head's folder (stored without lm_head) loads as a folder too,
    its lm_head the target's rows by d2t, and says so; with lm_head the note is absent."""
    from specviz.core.drafters.registry import make_drafter

    head = random_head(pair, pair.vocab_size // 2)
    save_head(head, tmp_path / "bare", verifier="fixture", with_lm_head=False,
              dtype=torch.float32)  # fmt: skip
    drafter = make_drafter(DrafterConfig("eagle3", head=str(tmp_path / "bare")), target_only(pair))
    assert torch.equal(drafter.head.lm_head.weight, head.lm_head.weight)
    assert any("no lm_head.weight stored" in n for n in drafter.notes)
    save_head(head, tmp_path / "full", verifier="fixture", dtype=torch.float32)
    drafter = make_drafter(DrafterConfig("eagle3", head=str(tmp_path / "full")), target_only(pair))
    assert not any("lm_head" in n for n in drafter.notes)


def test_batched_greedy_answers_are_generate_one_prompt_at_a_time(pair):
    """check-head's answers (fit.greedy_answers: prompts of different lengths, padded on the
    left, 2 at a time) are generate()'s for each prompt alone, token for token, an answer
    that ends early included (its end token kept, the padding after it cut)."""
    import copy

    from specviz.core.drafters.eagle3.fit import greedy_answers

    target = copy.deepcopy(pair.target)
    prompts = [pair.tokenizer(p)["input_ids"] for p in (*PROMPTS, "the", "A fool and")]
    plain = greedy_answers(target, prompts, 10, pair.eos_token_id, batch=2)
    end = plain[0][len(prompts[0]) + 3]  # a token the first answer writes: now its end
    target.generation_config.eos_token_id = end
    batched = greedy_answers(target, prompts, 10, end, batch=2)
    alone = []
    for ids in prompts:
        t = torch.tensor([ids])
        with torch.inference_mode():
            out = target.generate(t, attention_mask=torch.ones_like(t), max_new_tokens=10,
                                  do_sample=False, pad_token_id=end)  # fmt: skip
        alone.append(out[0].tolist())
    assert batched == alone
    assert len(batched[0]) < len(prompts[0]) + 10 and batched[0][-1] == end  # ended early
    assert any(len(b) == len(p) + 10 for b, p in zip(batched, prompts, strict=True))
