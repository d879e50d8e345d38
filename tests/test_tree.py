"""A token tree in one target pass (core.tree.attention): every node's logits equal a fresh
forward of the context and its own path, with a 4-D mask and tree position ids, on GPT-2
(absolute positions) and Llama (rotary); after the pass, the cache cut to an accepted path
gives what a fresh forward of that path gives."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import DynamicCache

from specviz.core.decoding.forward import forward
from specviz.core.trace.tree_nodes import node_depths as depths
from specviz.core.tree.attention import keep_path, score_tree, tree_mask


@pytest.fixture(scope="module")
def llama(pair):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=pair.vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
    )  # fmt: skip
    return LlamaForCausalLM(config).eval()


def random_tree(rng: random.Random, n: int) -> list[int]:
    return [-1] + [rng.randrange(i) for i in range(1, n)]  # one root, parents earlier


def path_to(parents: list[int], node: int) -> list[int]:
    path = []
    while node >= 0:
        path.append(node)
        node = parents[node]
    return path[::-1]


@pytest.mark.parametrize("model_name", ["gpt2", "llama"])
def test_every_node_sees_its_context_and_ancestors_only(pair, llama, model_name):
    model = pair.target if model_name == "gpt2" else llama
    vocab = pair.vocab_size
    rng = random.Random(0)
    context = [rng.randrange(vocab) for _ in range(6)]
    for n in (1, 5, 12):
        parents = random_tree(rng, n)
        tokens = [rng.randrange(vocab) for _ in range(n)]
        with torch.inference_mode():
            cache = DynamicCache()
            forward(model, context, cache, vocab, keep=1)
            logits = score_tree(model, tokens, parents, cache, vocab)
            assert cache.get_seq_length() == len(context) + n
            for node in range(n):
                ids = context + [tokens[i] for i in path_to(parents, node)]
                fresh = model(input_ids=torch.tensor([ids])).logits[0, -1, :vocab]
                assert torch.allclose(logits[node], fresh, atol=1e-4), (model_name, n, node)
            # the cache cut to the deepest node's path: the next token as a fresh forward
            path = path_to(parents, max(range(n), key=lambda i: depths(parents)[i]))
            keep_path(cache, len(context), path)
            assert cache.get_seq_length() == len(context) + len(path)
            after = forward(model, [7], cache, vocab, keep=1)[0]
            ids = context + [tokens[i] for i in path] + [7]
            fresh = model(input_ids=torch.tensor([ids])).logits[0, -1, :vocab]
            assert torch.allclose(after, fresh, atol=1e-4)


def test_the_mask_and_depths_by_hand():
    parents = [-1, 0, 0, 1]  # a root, two children, a grandchild under the first
    assert depths(parents) == [1, 2, 2, 3]  # 1: a child of the context
    visible = tree_mask(parents, 2, torch.float32)[0, 0] == 0
    assert visible.tolist() == [
        [True, True, True, False, False, False],
        [True, True, True, True, False, False],
        [True, True, True, False, True, False],
        [True, True, True, True, False, True],
    ]
    with pytest.raises(ValueError, match="not an earlier node"):
        depths([-1, 2, 0])


@pytest.mark.parametrize("draw", ["sample", "topk"])
def test_a_greedy_tree_round_is_the_targets_greedy_text(pair, draw):
    from specviz.core.decoding.warp import SamplingConfig
    from specviz.core.tree.reference import tree_round
    from tests.test_drafters import PROMPTS, greedy_reference

    for prompt in PROMPTS:
        ids = pair.tokenizer(prompt)["input_ids"]
        rnd = tree_round(pair, ids, 3, 3, SamplingConfig(temperature=0), draw)
        assert rnd.emitted == greedy_reference(pair.target, ids, len(rnd.emitted), None)


@pytest.mark.parametrize("model_name", ["gpt2", "llama"])
def test_a_tree_fed_a_level_at_a_time_sees_what_a_fresh_forward_sees(pair, llama, model_name):
    """The tree drafter's way (core.drafters.tree_draft): a random tree fed level by level
    after the context, each level one pass that sees the earlier levels through `slots`;
    every node's logits equal a fresh forward of its path (rotary positions included), and
    the cache cut to a path by keep_positions gives a fresh forward's next logits."""
    from specviz.core.tree.attention import keep_positions, tree_forward

    model = pair.target if model_name == "gpt2" else llama
    vocab = pair.vocab_size
    rng = random.Random(1)
    context = [rng.randrange(vocab) for _ in range(5)]
    parents = random_tree(rng, 14)
    tokens = [rng.randrange(vocab) for _ in range(14)]
    depth = depths(parents)
    with torch.inference_mode():
        cache = DynamicCache()
        forward(model, context, cache, vocab, keep=1)
        slots: dict[int, int] = {}
        for level in range(1, max(depth) + 1):
            new = [i for i in range(14) if depth[i] == level]
            logits = tree_forward(model, tokens, parents, new, slots, cache, vocab, len(context))
            for row, node in enumerate(new):
                ids = context + [tokens[i] for i in path_to(parents, node)]
                fresh = model(input_ids=torch.tensor([ids])).logits[0, -1, :vocab]
                assert torch.allclose(logits[row], fresh, atol=1e-4), (model_name, node)
        path = path_to(parents, max(range(14), key=lambda i: depth[i]))
        keep_positions(cache, [*range(len(context)), *(slots[i] for i in path)])
        after = forward(model, [3], cache, vocab, keep=1)[0]
        ids = context + [tokens[i] for i in path] + [3]
        fresh = model(input_ids=torch.tensor([ids])).logits[0, -1, :vocab]
        assert torch.allclose(after, fresh, atol=1e-4)
