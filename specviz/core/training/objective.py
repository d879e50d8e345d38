"""The loss of a batch and the held-out measurement, on the teacher's states.

Rows are speculators' shifted pairs, packed over sequences: row t of a sequence is (token
x_{t+1}, the target's aux states at t) and predicts x_{t+2}; training-time test step s feeds
the head its own states of step s - 1 and predicts x_{t+2+s}
(core.drafters.eagle3.fit.ttt_passes). The loss at step s is the KL divergence from the
target's distribution over the draft vocabulary (or, with topk N, its N likeliest tokens
renormalised) to the head's, on rows whose predicted token is trained (an assistant's, or any
of plain text), weighted decay ** s, and averaged over the rows of the whole global batch (the
same on one process as over N ranks).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specviz.core.drafters.eagle3.fit import ttt_passes
from specviz.core.training.examples import Example
from specviz.core.training.teacher import Teacher, pad_batch


@dataclass
class Pack:
    """The rows of some sequences, packed ([N] each; states [N, ...])."""

    ids: torch.Tensor  # x_{t+1}
    aux: torch.Tensor  # [N, n_aux * H] the aux states at t
    last: torch.Tensor  # [N, H] the target's final state at t + 1 (it predicts x_{t+2})
    pos: torch.Tensor  # t + 1
    doc: torch.Tensor  # which sequence
    trained: torch.Tensor  # bool: x_{t+2} is trained

    def valid(self, s: int) -> torch.Tensor:
        """[N] bool: row t has a trained target at step s (row t + s, same sequence)."""
        n = self.ids.shape[0]
        ok = torch.zeros(n, dtype=torch.bool, device=self.ids.device)
        if s < n:
            ok[: n - s] = (self.doc[s:] == self.doc[: n - s]) & self.trained[s:]
        return ok


def split_packs(batch: list[Example], pack_tokens: int) -> list[list[Example]]:
    """The batch's sequences in groups of at most pack_tokens rows (a longer one alone),
    shortest first, so that each group's prefill pads its rows to a near length (the loss
    sums over groups: their order and makeup do not change it)."""
    packs, group, size = [], [], 0
    for ex in sorted(batch, key=lambda ex: len(ex.ids)):
        if group and size + len(ex.ids) > pack_tokens:
            packs.append(group)
            group, size = [], 0
        group.append(ex)
        size += len(ex.ids)
    return packs + ([group] if group else [])


def build_pack(teacher: Teacher, group: list[Example], pad: int) -> Pack:
    """The teacher's prefill over a group of sequences, as packed rows."""
    ids, attention = pad_batch([ex.ids for ex in group], pad)
    states = teacher.prefill(ids, attention)
    device = teacher.device
    parts: dict[str, list[torch.Tensor]] = {k: [] for k in ("ids", "aux", "last", "pos", "doc",
                                                               "trained")}  # fmt: skip
    for b, ex in enumerate(group):
        n = len(ex.ids)
        mask = torch.tensor(ex.mask, device=device)
        parts["ids"].append(ids[b, 1:n].to(device))
        parts["aux"].append(states.aux[b, : n - 1])
        parts["last"].append(states.last[b, 1:n])
        parts["pos"].append(torch.arange(1, n, device=device))
        parts["doc"].append(torch.full((n - 1,), b, device=device))
        parts["trained"].append(torch.cat([mask[2:], mask[-1:]]))  # x_{t+2}; past the end: last
    return Pack(**{k: torch.cat(v) for k, v in parts.items()})


def counts(pack: Pack, steps: int) -> torch.Tensor:
    """[steps] rows scored at each step."""
    return torch.tensor([int(pack.valid(s).sum()) for s in range(steps)], dtype=torch.float64)


def soft_label(target_logp: torch.Tensor, topk: int) -> tuple[torch.Tensor | None, torch.Tensor]:
    """(indices [N, k], log-probabilities [N, k]) of the label: the target's top-k over the
    draft vocabulary renormalised; (None, target_logp) for the whole distribution (topk 0, or
    at least the draft vocabulary)."""
    if not topk or topk >= target_logp.shape[-1]:
        return None, target_logp
    values, index = target_logp.topk(topk, dim=-1)
    return index, values - torch.logsumexp(values, -1, keepdim=True)


def label_kl(label: tuple[torch.Tensor | None, torch.Tensor], logq: torch.Tensor) -> torch.Tensor:
    """Sum over rows of KL(label || q), q's log-probabilities logq [N, Vd]."""
    index, logp = label
    if index is not None:
        logq = logq.gather(-1, index)
    return (logp.exp() * (logp - logq)).sum()


def pack_loss(head, teacher: Teacher, pack: Pack, draft_ids: torch.Tensor, steps: int,
              decay: float, total: torch.Tensor, topk: int = 0) -> torch.Tensor:  # fmt: skip
    """The loss of one pack: the decay-weighted KL summed over its scored rows, each step's
    divided by `total` [steps], the global batch's count of scored rows at that step; the
    label the target's distribution, or its top-k renormalised (soft_label)."""
    with torch.no_grad():  # [N, Vd] the target's log-probabilities over the draft vocabulary
        scored = pack.trained.nonzero()[:, 0]
        target_logp = torch.zeros(pack.ids.shape[0], len(draft_ids), device=teacher.device)
        target_logp[scored] = torch.log_softmax(teacher.logits(pack.last[scored], draft_ids), -1)
    loss = torch.zeros((), device=teacher.device)
    passes = ttt_passes(head, teacher.embed, pack.ids, pack.aux, pack.pos, pack.doc, steps)
    for s, out in enumerate(passes):
        rows = pack.valid(s).nonzero()[:, 0]
        if not len(rows) or not total[s]:
            continue
        logp = torch.log_softmax(head.logits(out[rows]).float(), -1)  # [n, Vd]
        kl = label_kl(soft_label(target_logp[rows + s], topk), logp)
        loss = loss + (decay**s) * kl / float(total[s])
    return loss


@dataclass
class Tallies:
    """The held-out counts per sequence and draft step ([sequences, steps] float64 each):
    `alpha` the summed sum_x min(p, q) over `scored` rows, `hits` the greedy drafts that equal
    the target's greedy token among `alive` rows (those whose earlier drafts all did)."""

    alpha: torch.Tensor
    scored: torch.Tensor
    hits: torch.Tensor
    alive: torch.Tensor

    def summary(self, sequences: torch.Tensor | None = None) -> dict:
        """The measurement over all sequences, or over `sequences` (indices, repeats
        counted: a bootstrap draw): `acceptance` (the head's greedy draft is the target's
        greedy token, given the earlier drafts were: check-head's rate), `expected` (sum_x
        min(p, q), the chance a draft sampled from q is kept at T 1: check-head's expected
        acceptance), and the simulated #MAT at K 3 and 4, 1 + the expected accepted drafts
        (the per-position expected acceptances chained), the bonus counted."""
        pick = (lambda t: t) if sequences is None else (lambda t: t[sequences])
        alpha, scored = pick(self.alpha).sum(0), pick(self.scored).sum(0)
        hits, alive = pick(self.hits).sum(0), pick(self.alive).sum(0)
        acceptance = [float(h / c) if c else 0.0 for h, c in zip(hits, alive, strict=True)]
        expected = [float(a / c) if c else 0.0 for a, c in zip(alpha, scored, strict=True)]
        return {
            "acceptance": [round(a, 4) for a in acceptance],
            "expected": [round(a, 4) for a in expected],
            "positions": [int(c) for c in scored],
            "mat_k3": round(mean_accepted_tokens(expected, 3), 4),
            "mat_k4": round(mean_accepted_tokens(expected, 4), 4),
            "mat_k4_greedy": round(mean_accepted_tokens(acceptance, 4), 4),
        }


@torch.no_grad()
def tally(head, teacher: Teacher, examples: list[Example], draft_ids: torch.Tensor,
          steps: int, pack_tokens: int, pad: int) -> Tallies:  # fmt: skip
    """The head's held-out teacher-forced counts, sequence by sequence (examples' order)."""
    head.eval()
    counts = {k: torch.zeros(len(examples), steps, dtype=torch.float64)
              for k in ("alpha", "scored", "hits", "alive")}  # fmt: skip
    index = {id(ex): i for i, ex in enumerate(examples)}
    for group in split_packs(examples, pack_tokens):
        pack = build_pack(teacher, group, pad)
        seq = torch.tensor([index[id(ex)] for ex in group])[pack.doc.cpu()]  # [N] row -> sequence
        lse = teacher.full_logsumexp(pack.last)  # [N]
        greedy = torch.cat([teacher.logits(pack.last[i : i + 1024]).argmax(-1)
                            for i in range(0, pack.last.shape[0], 1024)])  # fmt: skip
        alive = torch.ones_like(pack.trained)
        passes = ttt_passes(head, teacher.embed, pack.ids, pack.aux, pack.pos, pack.doc, steps)
        for s, out in enumerate(passes):
            valid = pack.valid(s)
            rows = valid.nonzero()[:, 0]
            logits = head.logits(out[rows]).float()  # [n, Vd]
            q = logits.softmax(-1)
            p = (teacher.logits(pack.last[rows + s], draft_ids) - lse[rows + s, None]).exp()
            where = seq[rows.cpu()]
            counts["alpha"][:, s].index_add_(0, where, torch.minimum(p, q).sum(-1).double().cpu())
            counts["scored"][:, s].index_add_(0, where, torch.ones(len(rows), dtype=torch.float64))
            match = torch.zeros_like(valid)
            match[rows] = draft_ids[logits.argmax(-1)] == greedy[rows + s]
            counted = alive & valid
            counts["hits"][:, s].index_add_(0, seq, (counted & match).double().cpu())
            counts["alive"][:, s].index_add_(0, seq, counted.double().cpu())
            alive &= match
    head.train()
    return Tallies(**counts)


def measure(head, teacher: Teacher, examples: list[Example], draft_ids: torch.Tensor,
            steps: int, pack_tokens: int, pad: int) -> dict:  # fmt: skip
    """The held-out measurement over all sequences (Tallies.summary)."""
    return tally(head, teacher, examples, draft_ids, steps, pack_tokens, pad).summary()


def mean_accepted_tokens(rates: list[float], k: int) -> float:
    """1 + sum over i <= k of the product of the first i rates: tokens per target pass."""
    total, run = 1.0, 1.0
    for rate in rates[:k]:
        run *= rate
        total += run
    return total
