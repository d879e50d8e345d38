"""train-head's packs: a batch's sequences grouped shortest first, so that each prefill pads
little, and the loss and its gradient the same however the batch is grouped."""

from __future__ import annotations

import random

import pytest
import torch

from specviz.core.training import examples
from specviz.core.training.objective import build_pack, counts, pack_loss, split_packs
from tests.train_head_data import tiny_run


def example(n: int) -> examples.Example:
    return examples.Example(ids=tuple(range(n)), mask=(True,) * n, source=0)


def padded(groups) -> int:
    return sum(len(g) * max(len(ex.ids) for ex in g) for g in groups)


def test_groups_hold_every_sequence_once_in_order_of_length():
    rng = random.Random(3)
    batch = [example(rng.randint(8, 500)) for _ in range(40)]
    groups = split_packs(batch, 1024)
    assert sorted(id(ex) for g in groups for ex in g) == sorted(id(ex) for ex in batch)
    lengths = [len(ex.ids) for g in groups for ex in g]
    assert lengths == sorted(lengths)
    assert all(sum(len(ex.ids) for ex in g) <= 1024 for g in groups)
    in_order, rows = [], 0  # the given order, grouped as before: more padding
    for ex in batch:
        if in_order and rows + len(ex.ids) > 1024:
            in_order.append([])
            rows = 0
        if not in_order:
            in_order.append([])
        in_order[-1].append(ex)
        rows += len(ex.ids)
    assert padded(groups) < padded(in_order)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return tiny_run(tmp_path_factory.mktemp("packs"))


def batch_loss(run, batch, pack_tokens: int) -> tuple[float, torch.Tensor]:
    packs = [build_pack(run.teacher, g, run.pad) for g in split_packs(batch, pack_tokens)]
    total = sum((counts(p, 3) for p in packs), torch.zeros(3, dtype=torch.float64))
    loss = sum(pack_loss(run.head, run.teacher, p, run.draft_ids, 3, 0.8, total) for p in packs)
    run.head.zero_grad(set_to_none=True)
    loss.backward()
    grad = torch.cat([p.grad.flatten() for p in run.params if p.grad is not None])
    return float(loss.detach()), grad


def test_the_loss_and_its_gradient_do_not_depend_on_how_the_batch_is_grouped(run):
    cuts = (64, 12, 40, 64, 9, 30, 55, 17, 64, 26, 48, 33)  # lengths that sorting reorders
    batch = [examples.Example(ex.ids[:n], ex.mask[:n], ex.source)
             for ex, n in zip(run.train[: len(cuts)], cuts, strict=True)]  # fmt: skip
    loss, grad = batch_loss(run, batch, 150)  # padded groups, shortest first
    alone, grad_alone = batch_loss(run, batch, 1)  # each sequence its own prefill, unpadded
    assert len(split_packs(batch, 150)) < len(batch)
    assert loss > 0
    assert alone == pytest.approx(loss, rel=1e-5)
    torch.testing.assert_close(grad_alone, grad, rtol=1e-4, atol=1e-6)
