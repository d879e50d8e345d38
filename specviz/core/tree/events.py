"""A tree round's records: the chain view (`tokens`: the accepted path, the last rejected
child where the round ended on one, the resampled or bonus token) and every node in columns
(Round.tree, schema 1.5; core.trace.extras.tree reads and checks them).

The chain view is built by round_events from the rows along the path, so its tokens carry
what a chain's do (top-N lists, alpha, the residual), p and q the target's p(x) and the
draft's q(x) as on any token; a judged token adds what its test used (schema 1.9): p_tried,
the probability it was tried against (after its earlier siblings' updates) and, under the
topk rule, q_tried = 1 (a child chosen without randomness: the rule keeps it with p alone).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from specviz.core.decoding.token_events import round_events
from specviz.core.decoding.verify import Verdict
from specviz.core.trace.extras.tree import TokenTree
from specviz.core.trace.records import JUDGED, TokenEvent
from specviz.core.tree.walk import TreeWalk


def tree_events(
    tokens: list[int],
    parents: list[int],
    p_rows: torch.Tensor,
    q_at: dict[int, torch.Tensor],
    walk: TreeWalk,
    rule: str,
    n_emit: int,
    text: Callable[[int], str],
    top_n: int,
) -> tuple[tuple[TokenEvent, ...], dict[str, Any]]:
    """(the round's tokens, its `tree` record). p_rows [n + 1, V] and q_at as walk_tree
    took them; n_emit < len(path) + 1 drops what follows an end-of-text token."""
    chain = list(walk.path)
    if walk.next_status == "resampled":
        chain.append(walk.last_rejected)
    above = [-1, *walk.path]  # the parent of each chain position
    p_chain = torch.stack(
        [p_rows[node + 1] for node in above[: len(chain) + 1]]
        + ([p_rows[chain[-1] + 1]] if len(chain) == len(above) else [])
    )
    q_chain = (torch.stack([q_at[above[j]] for j in range(len(chain))]) if chain
               else p_rows.new_zeros((0, p_rows.shape[-1])))  # fmt: skip
    verdict = Verdict(
        n_accepted=len(walk.path),
        next_token=walk.next_token,
        next_status=walk.next_status,
        accept_probs=tuple(walk.accept_probs[node] for node in chain),
        u=tuple(walk.u[node] for node in chain),
        next_dist=walk.next_dist.float(),
    )
    drafted = [tokens[node] for node in chain]
    events = list(round_events(p_chain, q_chain, drafted, verdict, n_emit, text, top_n))
    for j, node in enumerate(chain[: len(events)]):
        event = events[j]
        if event.status in JUDGED:
            tried = {"p_tried": walk.p_tried[node], "q_tried": 1.0 if rule == "topk" else None}
            events[j] = TokenEvent(**{**vars(event), **tried})
    return tuple(events), tree_record(tokens, parents, p_rows, q_at, walk, rule, text)


def tree_record(tokens, parents, p_rows, q_at, walk: TreeWalk, rule: str, text) -> TokenTree:
    """Round.tree: every node's columns (core.trace.extras.tree.TokenTree says what each
    holds)."""
    index = torch.tensor(tokens, dtype=torch.long, device=p_rows.device)
    rows = torch.tensor([parent + 1 for parent in parents], dtype=torch.long,
                        device=p_rows.device)  # fmt: skip
    p = p_rows[rows, index].tolist() if tokens else []
    q = [float(q_at[parent][token]) for parent, token in zip(parents, tokens, strict=True)]
    return TokenTree(
        rule=rule,
        parent=tuple(parents),
        token=tuple(tokens),
        text=tuple(text(token) for token in tokens),
        fate=tuple(walk.fates),
        q=tuple(q),
        p=tuple(p),
        p_tried=tuple(walk.p_tried),
        accept_prob=tuple(walk.accept_probs),
        u=tuple(walk.u),
    )
