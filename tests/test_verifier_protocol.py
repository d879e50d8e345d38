"""One Verifier protocol for chains and trees (issue 51): every registered rule has the same
four stages with the same signatures, and a chain is a width-1 tree, so the tree rule judges
a chain Proposal as exactly as the chain rules do (each emitted token follows the target's p
at its position), while a chain rule refuses a tree."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from specviz.core.decoding.proposal import Proposal
from specviz.core.decoding.verifier import Verifier, verifier_for
from specviz.core.trace import verifiers
from tests.test_sampling import LEVEL, chi2_pvalue, random_pq

STAGES = ("score", "judge", "commit", "events")


@pytest.mark.parametrize("name", list(verifiers.SPECS))
def test_every_rule_has_the_same_stages(name):
    rule = type(verifier_for(name))
    for stage in STAGES:
        ours = list(inspect.signature(getattr(rule, stage)).parameters)
        assert ours == list(inspect.signature(getattr(Verifier, stage)).parameters), stage


@pytest.mark.parametrize("name", verifiers.names(lossless=True))
def test_a_chain_is_a_width_one_tree_to_every_lossless_rule(name):
    """Drafts sampled from q, a chain Proposal judged by the rule: the token emitted at each
    position follows p there (given the round got there), the tree rule included."""
    k, vocab, runs = 3, 6, 6000
    p, q = (t.float() for t in random_pq(k, vocab, seed=7))
    rule = verifier_for(name)
    gen = torch.Generator().manual_seed(3)
    emitted = np.zeros((k + 1, vocab), dtype=np.int64)
    for _ in range(runs):
        drafts = [int(torch.multinomial(q[i], 1, generator=gen)) for i in range(k)]
        judged = rule.judge(Proposal.chain(drafts, q, "k"), p, gen)
        assert judged.path == tuple(range(len(judged.path)))  # a prefix of the chain
        for i, token in enumerate([*(drafts[n] for n in judged.path), judged.next_token]):
            emitted[i, token] += 1
    for i in range(k + 1):
        assert chi2_pvalue(emitted[i], p[i].double().numpy()) > LEVEL, f"{name}: position {i}"


@pytest.mark.parametrize("name", verifiers.names(trees=False))
def test_a_chain_rule_refuses_a_tree(name):
    p, q = (t.float() for t in random_pq(2, 5, seed=1))
    tree = Proposal([1, 2], [-1, -1], {-1: q[0]}, "k")  # two children of the context
    with pytest.raises(ValueError, match="judges chains"):
        verifier_for(name).judge(tree, p[:3], torch.Generator().manual_seed(0))
