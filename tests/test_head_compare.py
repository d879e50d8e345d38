"""The held-out measurement sequence by sequence, and the paired interval between two heads
that decides whether a newly trained head replaces the shipped one."""

from __future__ import annotations

import copy

import pytest
import torch

from specviz.core.training import examples
from specviz.core.training.compare import paired_difference
from specviz.core.training.objective import Tallies, measure, tally
from tests.train_head_data import tiny_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return tiny_run(tmp_path_factory.mktemp("compare"))


def _cut(run, lengths):
    """Held-out-like sequences of these lengths, which packing sorts out of order."""
    return [examples.Example(ex.ids[:n], ex.mask[:n], ex.source)
            for ex, n in zip(run.train[: len(lengths)], lengths, strict=True)]  # fmt: skip


def _tally(run, seqs, head=None) -> Tallies:
    return tally(head or run.head, run.teacher, seqs, run.draft_ids, 4, 150, run.pad)


def test_each_sequences_counts_are_its_own_measured_alone(run):
    seqs = _cut(run, (64, 12, 40, 9, 55, 30))
    together = _tally(run, seqs)
    assert float(together.scored.sum()) > 0
    for i, seq in enumerate(seqs):
        alone = _tally(run, [seq])
        for name in ("alpha", "scored", "hits", "alive"):
            torch.testing.assert_close(getattr(together, name)[i], getattr(alone, name)[0],
                                       rtol=1e-4, atol=1e-4)  # fmt: skip
    whole = measure(run.head, run.teacher, seqs, run.draft_ids, 4, 150, run.pad)
    assert whole == together.summary()
    assert together.summary(torch.arange(len(seqs))) == whole


def test_a_head_against_itself_differs_by_exactly_nothing(run):
    t = _tally(run, _cut(run, (64, 12, 40, 9, 55, 30, 48, 20)))
    for diff, low, high in paired_difference(t, t, draws=200).values():
        assert (diff, low, high) == (0.0, 0.0, 0.0)


def test_a_better_head_is_seen_better_and_a_worse_one_worse(run):
    seqs = _cut(run, (64, 12, 40, 9, 55, 30, 48, 20, 60, 33))
    base = _tally(run, seqs)
    worse_head = copy.deepcopy(run.head)
    with torch.no_grad():  # noise on every weight: its drafts drift from the target's
        for p in worse_head.parameters():
            p.add_(torch.randn_like(p) * p.std().nan_to_num(0.1) * 3)
    worse = _tally(run, seqs, worse_head)
    diff, low, high = paired_difference(base, worse, draws=300)["mat_k4"]
    assert high < 0 and low <= diff <= high
    diff, low, high = paired_difference(worse, base, draws=300)["mat_k4"]
    assert low > 0


def test_heads_measured_on_different_sequences_are_refused(run):
    a = _tally(run, _cut(run, (64, 12)))
    b = _tally(run, _cut(run, (64, 12, 40)))
    with pytest.raises(ValueError, match="different sequences"):
        paired_difference(a, b)


def test_heads_of_a_built_in_pair_are_compared_on_the_same_sequences(tmp_path):
    from specviz.core.models.builtin import resources_dir
    from specviz.core.training.compare import compare_heads
    from tests.train_head_data import write_text

    head = resources_dir() / "models" / "tiny" / "eagle3"
    measured = compare_heads("builtin:tiny", [head, head], [str(write_text(tmp_path / "t.txt"))],
                             max_length=64, say=lambda m: None)  # fmt: skip
    (_, a), (_, b) = measured
    assert float(a.scored.sum()) > 0 and a.alpha.shape[0] > 1
    assert a.summary() == b.summary()
    assert paired_difference(a, b, draws=50)["mat_k4"] == (0.0, 0.0, 0.0)
