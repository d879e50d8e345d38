"""train-head --topk N: the soft label is the target's N likeliest draft tokens, renormalised
(0, the default: its whole distribution over the draft vocabulary, as speculators and
SpecForge train)."""

from __future__ import annotations

import json

import torch

from specviz.core.training.objective import label_kl, soft_label


def _logp(rows: int = 5, vocab: int = 11, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.log_softmax(torch.randn(rows, vocab, generator=gen) * 2, -1)


def test_the_whole_distribution_is_the_label_without_topk():
    p, q = _logp(), _logp(seed=1)
    for topk in (0, 11, 50):  # 0, or at least the draft vocabulary: the whole distribution
        index, label = soft_label(p, topk)
        assert index is None and label is p
    full = (p.exp() * (p - q)).sum()
    assert torch.allclose(label_kl(soft_label(p, 0), q), full)


def test_topk_renormalises_the_likeliest_tokens():
    p, q = _logp(), _logp(seed=1)
    index, label = soft_label(p, 3)
    assert index.shape == label.shape == (5, 3)
    assert torch.equal(index, p.topk(3, -1).indices)
    assert torch.allclose(label.exp().sum(-1), torch.ones(5))
    mass = torch.logsumexp(p.topk(3, -1).values, -1, keepdim=True)
    assert torch.allclose(label - p.gather(-1, index), -mass)
    # top 1: the cross-entropy of the head on the target's greedy token
    one = label_kl(soft_label(p, 1), q)
    assert torch.allclose(one, -q.gather(-1, p.argmax(-1, keepdim=True)).sum())
    assert label_kl(soft_label(p, 3), p) > 0  # q = p is off a truncated label
    truncated = torch.full_like(p, -torch.inf).scatter(-1, index, label)
    assert torch.allclose(label_kl((index, label), truncated.clamp_min(-1e4)), torch.zeros(()))


def test_train_head_trains_on_top_k_labels(tmp_path, capsys):
    from specviz.cli.main import main
    from tests.train_head_data import FAST, write_text

    text = write_text(tmp_path / "text.txt")
    out = tmp_path / "head"
    args = ["train-head", "--target", "builtin:tiny", "--data", str(text), *FAST]
    code = main([*args, "--out", str(out), "--topk", "8", "--tokens", "768", "--eval-every",
                 "2", "--no-check"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "training.json").read_text())
    assert report["config"]["topk"] == 8 and report["curve"]
    assert all(x["loss"] > 0 for x in report["losses"])
    assert "its top 8 renormalised" in (out / "README.md").read_text()
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "bad"), "--topk", "-1"]) == 2
    err = capsys.readouterr().err
    assert "--topk must be 0" in err and not (tmp_path / "bad").exists()
