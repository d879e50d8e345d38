"""Turn one verification (p, q, drafts, verdict) into the round's TokenEvents.

All per-position figures are computed here, batched over positions, with one `topk` per
position kind and one host transfer per tensor; the GUI only displays them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from specviz.core.decoding.verify import Verdict, acceptance_mass
from specviz.core.trace.records import TokenEvent


def _largest(dist: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Values and indices [..., n] of the n largest entries of dist [..., V], largest first."""
    n = min(n, dist.shape[-1])
    return torch.topk(dist, n, dim=-1)


@dataclass
class _TopLists:
    """The top-N lists of a round's K + 1 positions (empty when not recorded)."""

    tops: list  # [(id, p, q), ...] per position; q None at the bonus position
    texts: list  # the texts of their ids
    p_rest: list  # target mass outside each list
    q_rest: list  # draft mass outside each list (None at the bonus position)
    # p of each entry per drafted position: what a discarded token records as unjudged_top_p
    top_p: list = field(default_factory=list)
    residual_top: tuple = ()  # (id, r) of the residual a resampled token was drawn from
    residual_text: tuple = ()


def _top_lists(
    p: torch.Tensor, q: torch.Tensor, verdict: Verdict, text: Callable[[int], str], top_n: int
) -> _TopLists:
    """Drafted positions by max(p, q), the bonus position by p, the residual by r."""
    k = q.shape[0]
    lists = _TopLists([()] * (k + 1), [()] * (k + 1), [None] * (k + 1), [None] * (k + 1))
    if top_n <= 0:
        return lists
    if k:
        p_k = p[:k]  # [K, V]
        _, idx = _largest(torch.maximum(p_k, q), top_n)  # [K, N] by max(p, q)
        tp, tq = p_k.gather(1, idx), q.gather(1, idx)  # [K, N]
        lists.p_rest = [max(0.0, 1 - s) for s in tp.sum(1).tolist()] + [None]
        lists.q_rest = [max(0.0, 1 - s) for s in tq.sum(1).tolist()] + [None]
        lists.top_p = tp.tolist()
        for i, (row_i, row_p, row_q) in enumerate(
            zip(idx.tolist(), lists.top_p, tq.tolist(), strict=True)
        ):
            lists.tops[i] = tuple(zip(row_i, row_p, row_q, strict=True))
    bonus_p, bonus_i = _largest(p[k], top_n)  # [N]
    lists.tops[k] = tuple(
        (i, v, None) for i, v in zip(bonus_i.tolist(), bonus_p.tolist(), strict=True)
    )
    lists.p_rest[k] = max(0.0, 1 - float(bonus_p.sum()))
    if verdict.next_status == "resampled":
        r_val, r_idx = _largest(verdict.next_dist, top_n)
        lists.residual_top = tuple(zip(r_idx.tolist(), r_val.tolist(), strict=True))
        lists.residual_text = tuple(text(i) for i, _ in lists.residual_top)
    lists.texts = [tuple(text(entry[0]) for entry in top) for top in lists.tops]
    return lists


def round_events(
    p: torch.Tensor,
    q: torch.Tensor,
    drafted: list[int],
    verdict: Verdict,
    n_emit: int,
    text: Callable[[int], str],
    top_n: int,
) -> tuple[TokenEvent, ...]:
    """Events of one round, in stream order: judged drafts, discarded drafts, the round's
    own token (resampled or bonus). n_emit < n_accepted + 1 drops tokens after an EOS.

    p: [K+1, V] target, q: [K, V] draft, both warped. top_n = 0 skips the top-N lists.
    """
    k = len(drafted)
    rows = torch.arange(k, device=p.device)
    ids = torch.tensor(drafted, dtype=torch.long, device=p.device)
    alpha = acceptance_mass(p[:k], q).tolist()  # [K]: sum_x min(p, q) per position
    p_x = p[:k][rows, ids].tolist()  # [K]
    q_x = q[rows, ids].tolist()  # [K]
    lists = _top_lists(p, q, verdict, text, top_n)
    events = _drafted_events(drafted, verdict, n_emit, text, p_x, q_x, alpha, lists)
    if n_emit == verdict.n_accepted + 1:
        events.append(_own_token(p, q, verdict, text, alpha, lists))
    return tuple(events)


def _drafted_events(
    drafted: list[int],
    verdict: Verdict,
    n_emit: int,
    text: Callable[[int], str],
    p_x: list[float],
    q_x: list[float],
    alpha: list[float],
    lists: _TopLists,
) -> list[TokenEvent]:
    """The judged drafts (accepted, then the rejected one), then the discarded ones."""
    events: list[TokenEvent] = []
    for i, token in enumerate(drafted):
        if i < verdict.n_judged:
            status = "accepted" if i < verdict.n_accepted else "rejected"
            if status == "accepted" and i >= n_emit:
                break  # after an accepted EOS: never emitted
            events.append(
                TokenEvent(
                    id=token,
                    text=text(token),
                    status=status,
                    p=p_x[i],
                    q=q_x[i],
                    accept_prob=verdict.accept_probs[i],
                    u=verdict.u[i],
                    alpha=alpha[i],
                    top=lists.tops[i],
                    top_text=lists.texts[i],
                    p_rest=lists.p_rest[i],
                    q_rest=lists.q_rest[i],
                )
            )
        else:
            # Drafted after the first rejection: never judged. The target's pass scored it
            # all the same: its p is recorded apart (schema 1.2's unjudged_*), and `top`
            # keeps p null, as a judged p would be there.
            events.append(
                TokenEvent(
                    id=token,
                    text=text(token),
                    status="discarded",
                    q=q_x[i],
                    top=tuple((e[0], None, e[2]) for e in lists.tops[i]),
                    top_text=lists.texts[i],
                    q_rest=lists.q_rest[i],
                    unjudged_p=p_x[i],
                    unjudged_p_rest=lists.p_rest[i],
                    unjudged_top_p=tuple(lists.top_p[i]) if lists.top_p else (),
                )
            )
    return events


def _own_token(
    p: torch.Tensor,
    q: torch.Tensor,
    verdict: Verdict,
    text: Callable[[int], str],
    alpha: list[float],
    lists: _TopLists,
) -> TokenEvent:
    """The round's own token at the position where the drafts stopped being accepted:
    resampled from the residual after a rejection, or the bonus token after all K."""
    pos, token = verdict.n_accepted, verdict.next_token
    resampled = verdict.next_status == "resampled"
    return TokenEvent(
        id=token,
        text=text(token),
        status=verdict.next_status,
        p=float(p[pos, token]),
        q=float(q[pos, token]) if pos < q.shape[0] else None,
        alpha=alpha[pos] if resampled else None,
        residual=float(verdict.next_dist[token]) if resampled else None,
        top=lists.tops[pos],
        top_text=lists.texts[pos],
        p_rest=lists.p_rest[pos],
        q_rest=lists.q_rest[pos],
        residual_top=lists.residual_top,
        residual_text=lists.residual_text,
    )
