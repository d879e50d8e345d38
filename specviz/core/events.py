"""Turn one verification (p, q, drafts, verdict) into the round's TokenEvents.

All per-position figures are computed here, batched over positions, with one `topk` per
position kind and one host transfer per tensor; the GUI only displays them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .sampling import Verdict, acceptance_mass
from .trace import TokenEvent


def _top(dist: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices [..., n] of the n largest entries of dist [..., V], largest first."""
    n = min(n, dist.shape[-1])
    return torch.topk(dist, n, dim=-1)


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
    k, n_acc = len(drafted), verdict.n_accepted
    rows = torch.arange(k, device=p.device)
    ids = torch.tensor(drafted, dtype=torch.long, device=p.device)
    p_k = p[:k]  # [K, V]
    alpha = acceptance_mass(p_k, q).tolist()  # [K]: sum_x min(p, q) per position
    p_x = p_k[rows, ids].tolist()  # [K]
    q_x = q[rows, ids].tolist()  # [K]
    next_id = verdict.next_token
    next_p = float(p[n_acc, next_id])
    next_q = float(q[n_acc, next_id]) if n_acc < k else None

    tops: list = [()] * (k + 1)
    texts: list = [()] * (k + 1)
    p_rest: list = [None] * (k + 1)
    q_rest: list = [None] * (k + 1)
    residual_top: tuple = ()
    residual_text: tuple = ()
    if top_n > 0:
        if k:
            _, idx = _top(torch.maximum(p_k, q), top_n)  # [K, N] by max(p, q)
            tp, tq = p_k.gather(1, idx), q.gather(1, idx)  # [K, N]
            p_rest = [max(0.0, 1 - s) for s in tp.sum(1).tolist()] + [None]
            q_rest = [max(0.0, 1 - s) for s in tq.sum(1).tolist()] + [None]
            for i, (row_i, row_p, row_q) in enumerate(zip(idx.tolist(), tp.tolist(), tq.tolist())):
                tops[i] = tuple(zip(row_i, row_p, row_q))
        bonus_p, bonus_i = _top(p[k], top_n)  # [N]
        tops[k] = tuple((i, v, None) for i, v in zip(bonus_i.tolist(), bonus_p.tolist()))
        p_rest[k] = max(0.0, 1 - float(bonus_p.sum()))
        if verdict.next_status == "resampled":
            r_val, r_idx = _top(verdict.next_dist, top_n)
            residual_top = tuple(zip(r_idx.tolist(), r_val.tolist()))
            residual_text = tuple(text(i) for i, _ in residual_top)
        for i in range(k + 1):
            texts[i] = tuple(text(entry[0]) for entry in tops[i])

    events: list[TokenEvent] = []
    for i, token in enumerate(drafted):
        if i < verdict.n_judged:
            status = "accepted" if i < n_acc else "rejected"
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
                    top=tops[i],
                    top_text=texts[i],
                    p_rest=p_rest[i],
                    q_rest=q_rest[i],
                )
            )
        else:
            # Drafted after the first rejection: never judged; only its draft side exists.
            drafted_top = tuple((e[0], None, e[2]) for e in tops[i])
            events.append(
                TokenEvent(
                    id=token,
                    text=text(token),
                    status="discarded",
                    q=q_x[i],
                    top=drafted_top,
                    top_text=texts[i],
                    q_rest=q_rest[i],
                )
            )
    if n_emit == n_acc + 1:
        resampled = verdict.next_status == "resampled"
        pos = n_acc
        events.append(
            TokenEvent(
                id=next_id,
                text=text(next_id),
                status=verdict.next_status,
                p=next_p,
                q=next_q,
                alpha=alpha[pos] if resampled else None,
                residual=float(verdict.next_dist[next_id]) if resampled else None,
                top=tops[pos],
                top_text=texts[pos],
                p_rest=p_rest[pos],
                q_rest=q_rest[pos],
                residual_top=residual_top,
                residual_text=residual_text,
            )
        )
    return tuple(events)
