"""The EAGLE-3 head's draft step without overhead above reading its weights (issue 50): its
cache written in place (HeadCache), RoPE rows from a table, no mask for one row, the logits
put on the target's vocabulary by an index; and a frequency-pruned draft vocabulary
(prune_draft_vocab). Each is checked against what it replaced, on the random head of
tests/test_eagle3.py; exactness of whole sessions is test_eagle3's."""

from __future__ import annotations

from copy import deepcopy

import pytest
import torch
from transformers import DynamicCache

from specviz.core.drafters.eagle3.format import build_head
from specviz.core.drafters.eagle3.head import HeadCache, causal_mask, prune_draft_vocab
from specviz.core.drafters.registry import DrafterConfig, make_drafter
from tests.test_eagle3 import random_head, target_only


@pytest.fixture(scope="module")
def head(pair):
    return random_head(pair, pair.vocab_size // 2, seed=3).eval()


def pairs(head, n: int, start: int = 0, seed: int = 0):
    """(embeds, states, positions) of n pairs at positions start + 1 .. start + n."""
    g = torch.Generator().manual_seed(seed)
    hidden = head.config.hidden
    return (torch.randn(n, hidden, generator=g), torch.randn(n, hidden, generator=g),
            torch.arange(start + 1, start + n + 1))  # fmt: skip


@torch.inference_mode()
def test_the_head_cache_gives_what_a_dynamic_cache_gives_through_crops_and_growth(head):
    ours, theirs = HeadCache(), DynamicCache()
    length = 0
    # a prefill, steps of one row, a crop, a tree level of rows, past the first capacity
    for n, crop in ((40, 0), (1, 0), (1, 0), (3, 2), (1, 0), (30, 5), (1, 0), (60, 1)):
        e, s, pos = pairs(head, n, length, seed=n + length)
        a = head(e, s, pos, None, ours)
        b = head(e, s, pos, None, theirs)
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        length += n
        if crop:
            ours.crop(-crop)
            theirs.crop(-crop)
            length -= crop
        assert ours.get_seq_length() == theirs.get_seq_length() == length
        torch.testing.assert_close(ours.layers[0].keys, theirs.layers[0].keys)
        torch.testing.assert_close(ours.layers[0].values, theirs.layers[0].values)


@torch.inference_mode()
def test_a_step_writes_into_the_cache_in_place(head):
    cache = HeadCache()
    e, s, pos = pairs(head, 10)
    head(e, s, pos, None, cache)
    buffer = cache.keys.data_ptr()
    for i in range(20):  # a DynamicCache concatenates: a new tensor every step
        e, s, pos = pairs(head, 1, 10 + i, seed=i)
        head(e, s, pos, None, cache)
    assert cache.keys.data_ptr() == buffer and cache.get_seq_length() == 30


def test_rope_rows_are_rotary_embs_own_and_follow_the_heads_dtype(head):
    for positions in (torch.tensor([5]), torch.tensor([1, 2, 3]), torch.tensor([700, 3])):
        cos, sin = head.rope(positions, torch.float32)  # 700: past the first table's 256
        ref = head.rotary_emb(torch.empty(0), positions[None])
        torch.testing.assert_close(cos, ref[0][0], rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(sin, ref[1][0], rtol=1e-6, atol=1e-6)
    copy = deepcopy(head).to(torch.bfloat16)  # inv_freq rounds to bf16: the table rebuilt
    copy.rope(torch.tensor([9]), torch.bfloat16)
    ref = copy.rotary_emb(torch.empty(0, dtype=torch.bfloat16), torch.tensor([[9]]))
    torch.testing.assert_close(copy.rope(torch.tensor([9]), torch.bfloat16)[0], ref[0][0])


@torch.inference_mode()
def test_a_draft_step_neither_recomputes_rope_nor_builds_a_mask(head, monkeypatch):
    cache = HeadCache()
    e, s, pos = pairs(head, 8)
    full = head(e, s, pos, None, cache)[0]
    calls = []
    monkeypatch.setattr(head.rotary_emb, "forward", lambda *a: calls.append(a))
    monkeypatch.setattr("specviz.core.drafters.eagle3.head.causal_mask",
                        lambda *a: calls.append(a))  # fmt: skip
    e1, s1, pos1 = pairs(head, 1, 8, seed=1)
    step = head(e1, s1, pos1, None, cache)[0]
    assert calls == []
    # one row after a cache sees all of it: the same as with the causal mask
    reference = DynamicCache()
    head(e, s, pos, None, reference)
    masked = head(e1, s1, pos1, causal_mask(1, 8, torch.float32), reference)[0]
    torch.testing.assert_close(step, masked, rtol=0, atol=0)
    assert full.shape[0] == 8


@torch.inference_mode()
def test_a_pruned_vocabulary_keeps_the_kept_rows_logits_and_target_ids(head):
    keep = torch.tensor([7, 0, 3, 100, 41, 3])  # any order, a repeat: taken once, ascending
    pruned = prune_draft_vocab(head, keep)
    kept = torch.tensor([0, 3, 7, 41, 100])
    assert pruned.config.draft_vocab == 5
    assert pruned.draft_to_target.tolist() == head.draft_to_target[kept].tolist()
    e, s, pos = pairs(head, 6)
    logits, out = head(e, s, pos)
    small, small_out = pruned(e, s, pos)
    torch.testing.assert_close(small, logits[:, kept], rtol=1e-5, atol=1e-5)  # GEMM blocking
    torch.testing.assert_close(small_out, out, rtol=0, atol=0)
    for bad in (torch.tensor([], dtype=torch.long), torch.tensor([head.config.draft_vocab])):
        with pytest.raises(ValueError):
            prune_draft_vocab(head, bad)


def test_a_pruned_head_saves_loads_and_drafts_only_its_vocabulary(pair, head, tmp_path):
    from specviz.core.drafters.eagle3.format import save_head

    pruned = prune_draft_vocab(head, torch.arange(0, head.config.draft_vocab, 3))
    save_head(pruned, tmp_path, verifier="fixture", dtype=torch.float32)
    target = pair.target
    loaded, config, _ = build_head(tmp_path, target.config.n_layer, target.config.n_embd,
                                   pair.vocab_size)  # fmt: skip
    assert config.draft_vocab == pruned.config.draft_vocab
    assert loaded.draft_to_target.tolist() == pruned.draft_to_target.tolist()
    drafter = make_drafter(DrafterConfig("eagle3", head=str(tmp_path)), target_only(pair))
    logits = torch.randn(2, pruned.config.draft_vocab)
    full = drafter._full(logits)  # the draft ids' logits at their target ids, -inf elsewhere
    expected = torch.full((2, pair.vocab_size), float("-inf"))
    expected[:, pruned.draft_to_target] = logits
    assert torch.equal(full, expected)
    q = torch.softmax(full[0], -1)
    allowed = set(pruned.draft_to_target.tolist())
    assert set(q.nonzero().flatten().tolist()) <= allowed


def session_drafter(pair, head_folder, prompt_ids):
    """A drafter after a prefill of prompt_ids, as the engine leaves it."""
    from specviz.core.decoding.forward import forward_states

    drafter = make_drafter(DrafterConfig("eagle3", head=str(head_folder)), target_only(pair))
    with torch.inference_mode():
        _, states = forward_states(pair.target, prompt_ids[:-1], DynamicCache(),
                                   pair.vocab_size, 1, drafter.target_layers)  # fmt: skip
        drafter.accept_states(states)
        drafter.prefill(prompt_ids, DynamicCache())
    return drafter


def test_a_greedy_chain_skips_the_targets_vocabulary_and_drafts_the_same(pair, head, tmp_path):
    from specviz.core.decoding.warp import SamplingConfig, sample, warp
    from specviz.core.drafters.eagle3.format import save_head

    save_head(head, tmp_path, verifier="fixture", dtype=torch.float32)
    ids = pair.tokenizer("the cat and the dog and the cat sat")["input_ids"]
    fast, general = session_drafter(pair, tmp_path, ids), session_drafter(pair, tmp_path, ids)
    assert fast._ordered
    greedy = SamplingConfig(temperature=0)
    g1, g2 = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    calls = []
    monkey = fast._full
    fast._full = lambda logits: calls.append(1) or monkey(logits)
    with torch.inference_mode():
        a = fast.propose(ids, 5, greedy, g1, None)  # the fast path
        b = general.propose(ids, 5, greedy, g2, lambda confidence: True)  # warp and sample
    assert calls == []  # no step put its logits on the target's vocabulary
    assert a.tokens == b.tokens and len(a.tokens) == 5
    for node in a.q:
        assert torch.equal(a.q[node], b.q[node])
    assert torch.equal(g1.get_state(), g2.get_state())  # the same draws were taken
    # a tie at the maximum: the first draft id, which is the first target id as well
    logits = torch.zeros(head.config.draft_vocab)
    logits[[5, 2, 9]] = 3.0
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    token, q = fast._greedy(logits, g1)
    q_ref = warp(general._full(logits), greedy)
    assert token == sample(q_ref, g2) == int(head.draft_to_target[2])
    assert torch.equal(q, q_ref) and torch.equal(g1.get_state(), g2.get_state())


def test_the_cost_probe_times_the_step_a_greedy_chain_takes(pair, head, tmp_path):
    from specviz.core.decoding.warp import SamplingConfig
    from specviz.core.drafters.eagle3.format import save_head

    save_head(head, tmp_path, verifier="fixture", dtype=torch.float32)
    ids = pair.tokenizer("the cat and the dog and the cat sat")["input_ids"]
    drafter = session_drafter(pair, tmp_path, ids)
    calls = []
    full = drafter._full
    drafter._full = lambda logits: calls.append(1) or full(logits)
    length = drafter.cache.get_seq_length()
    g1, g2 = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
    with torch.inference_mode():
        assert drafter.step_ms(ids, SamplingConfig(temperature=0), g1, "cpu") > 0
        assert calls == [] and drafter.cache.get_seq_length() == length  # cropped back
        drafter.step_ms(ids, SamplingConfig(temperature=1.0), g2, "cpu")
    assert calls == [1]  # sampling: warp and sample over the target's vocabulary
    assert torch.equal(g1.get_state(), g2.get_state())  # one draw each way
