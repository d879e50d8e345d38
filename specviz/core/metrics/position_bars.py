"""The numbers of the distribution panel for one position of a round, from its TokenEvents.

A position is one slot that the target judged (or would have judged): drafted position i of
a round holds the drafted token, and, where the round ended there, the token emitted in its
place (resampled after a rejection). Position K holds the bonus token. Everything shown is
taken from the stored events (their top-N of p and q), so a replay needs no models.
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.core.trace.extras.base import PositionTest
from specviz.core.trace.records import DRAFTED, JUDGED, Round, TokenEvent

REST_LABEL = "(everything else)"


@dataclass(frozen=True)
class PositionBars:
    """The bars and figures of one position.

    Bar lists are parallel; the last bar is "everything else" (id None) so that each of
    p and q adds up to 1. A value is None where the trace cannot tell it: p at a discarded
    position of a trace that did not record it (schema 1.1), q at a bonus position (nothing
    was drafted), min and max(0, p - q) of the "everything else" bar when alpha is unknown.
    At a discarded position no accept test ran: min and max(0, p - q) are None there even
    where p is known (p_never_judged).
    """

    round_index: int
    position: int  # 0-based slot within the round: 0..K-1 drafted, K bonus
    drafted_event: TokenEvent | None  # the drafted token here (None at a bonus position)
    emitted_event: TokenEvent | None  # the token emitted here (None if nothing was)
    # bars: the top-N by max(p, q), the drafted / emitted token if outside it, the rest
    ids: tuple[int | None, ...]
    labels: tuple[str, ...]
    p: tuple[float | None, ...]
    q: tuple[float | None, ...]
    min_pq: tuple[float | None, ...]  # min(p, q): the mass accepted as drafted
    excess: tuple[float | None, ...]  # max(0, p - q): the mass the residual redistributes
    drafted_bar: int | None  # index of the drafted token's bar
    emitted_bar: int | None  # index of the emitted token's bar
    # the verdict at this position (judged positions only)
    accept_prob: float | None  # min(1, p(x) / q(x)) of the drafted token x
    u: float | None  # the uniform draw: accepted exactly when u < accept_prob
    accepted: bool | None
    alpha: float | None  # sum_x min(p(x), q(x)): the chance that a draft is accepted here
    rejection_mass: float | None  # 1 - alpha
    # the residual norm(max(0, p - q)) the emitted token was drawn from (resampled only)
    residual_ids: tuple[int | None, ...] = ()
    residual_labels: tuple[str, ...] = ()
    residual: tuple[float, ...] = ()
    residual_bar: int | None = None  # index of the resampled token among the residual bars
    # p is the target's at a position it never judged (a discarded draft; schema 1.2's
    # unjudged_* numbers): computed by the round's target pass, but no accept test used it
    p_never_judged: bool = False
    # A block round (settings.verifier "block"): the block's numbers at this drafted
    # position, (p_i, h_i, u_i), and the drafts it kept; None in a token-wise round.
    block: tuple[float, float, float] | None = None
    block_kept: int | None = None
    # A typical round (settings.verifier "typical", lossy): the threshold the drafted
    # token's p was held against at this judged position; None elsewhere.
    typical_threshold: float | None = None
    typical: bool = False  # the round was verified by the typical rule
    # The accept test the round's rule ran here, from its recorded numbers (a round extra's
    # position_test: block, typical, or any rule registered since); None: token-wise.
    test: PositionTest | None = None
    round_drafted: int | None = None  # the round's n_drafted (0: nothing was drafted)
    round_stop: str | None = None  # why the round's drafting stopped (Round.stop)

    @property
    def n_bars(self) -> int:
        return len(self.ids)

    @property
    def kind(self) -> str:
        """'bonus', 'discarded' or the verdict of the drafted token."""
        if self.drafted_event is None:
            return "bonus"
        return self.drafted_event.status


def positions(rnd: Round) -> int:
    """How many positions a round shows: its drafted tokens, plus one for a bonus token."""
    drafted = sum(1 for t in rnd.tokens if t.status in DRAFTED)
    bonus = any(t.status == "bonus" for t in rnd.tokens)
    return drafted + (1 if bonus else 0)


def position_of(rnd: Round, token_index: int) -> int:
    """The position of rnd.tokens[token_index]: drafted tokens in order, then the round's
    own token at the position where the drafts stopped being accepted."""
    event = rnd.tokens[token_index]
    if event.status in DRAFTED:
        return sum(1 for t in rnd.tokens[:token_index] if t.status in DRAFTED)
    return sum(1 for t in rnd.tokens if t.status == "accepted")


def tokens_at(rnd: Round, position: int) -> tuple[int, ...]:
    """Indices into rnd.tokens of the tokens at a position (drafted first, then emitted)."""
    return tuple(i for i in range(len(rnd.tokens)) if position_of(rnd, i) == position)


def events_at(rnd: Round, position: int) -> tuple[TokenEvent | None, TokenEvent | None]:
    """(drafted, emitted) events at a position of a round."""
    drafted = emitted = None
    for i in tokens_at(rnd, position):
        event = rnd.tokens[i]
        if event.status in DRAFTED:
            drafted = event
        if event.emitted:
            emitted = event
    return drafted, emitted


def _rest_mass(
    stored_rest: float | None,
    stored_ids: list[int],
    stored: list[float | None],
    ids: list[int | None],
    shown: list[float | None],
) -> float | None:
    """Mass outside the shown bars: the stored rest, plus stored entries not shown, minus
    shown tokens that the stored top-N did not hold (their mass was in the stored rest)."""
    if stored_rest is None or any(v is None for v in shown):
        return None
    shown_ids, held = set(ids), set(stored_ids)
    dropped = sum(v or 0.0 for i, v in zip(stored_ids, stored, strict=True) if i not in shown_ids)
    added = sum(v for i, v in zip(ids, shown, strict=True) if i not in held)
    return max(0.0, stored_rest + dropped - added)


def _residual(
    emitted: TokenEvent | None, ids: list[int | None], labels: list[str], n: int | None
) -> tuple[tuple[int | None, ...], tuple[str, ...], tuple[float, ...], int | None]:
    """The residual bars of a resampled token: its stored top-N, the token, the rest."""
    if emitted is None or emitted.status != "resampled" or not emitted.residual_top:
        return (), (), (), None
    names = {i: label for i, label in zip(ids, labels, strict=True) if i is not None}
    names.update(zip((e[0] for e in emitted.residual_top), emitted.residual_text, strict=False))
    names[emitted.id] = emitted.text
    stored = list(emitted.residual_top)
    # entries with no mass (the residual's support is smaller than the stored top-N) are
    # not bars: the emitted token always has some
    stored = [e for e in stored if (e[1] or 0.0) > 0 or e[0] == emitted.id]
    keep = stored if n is None else stored[: max(0, n)]
    res_ids: list[int | None] = [e[0] for e in keep]
    values = [e[1] or 0.0 for e in keep]  # null only in a trace that does not validate
    if emitted.id not in res_ids and emitted.residual is not None:
        res_ids.append(emitted.id)
        values.append(emitted.residual)
    res_labels = [names.get(i, f"#{i}") for i in res_ids]
    res_ids.append(None)
    res_labels.append(REST_LABEL)
    values.append(max(0.0, 1.0 - sum(values)))
    bar = res_ids.index(emitted.id) if emitted.id in res_ids else None
    return tuple(res_ids), tuple(res_labels), tuple(values), bar


@dataclass
class _Columns:
    """The bars of a position as they are built: parallel lists, without the rest bar."""

    ids: list[int | None]
    labels: list[str]
    p: list[float | None]
    q: list[float | None]


def _p(event: TokenEvent) -> float | None:
    """The target's p of a token: judged, or (a discarded one, schema 1.2) never judged."""
    return event.unjudged_p if event.status == "discarded" else event.p


def _stored_p(full: TokenEvent) -> list[float | None]:
    """p of each entry of full.top: its column, or at a discarded position the aligned
    unjudged_top_p (None where a trace did not record it)."""
    if full.status != "discarded":
        return [e[1] for e in full.top]
    if len(full.unjudged_top_p) == len(full.top):
        return list(full.unjudged_top_p)
    return [None] * len(full.top)


def _top_columns(
    full: TokenEvent, drafted: TokenEvent | None, emitted: TokenEvent | None, n: int | None
) -> _Columns:
    """The first n of the stored top-N (all if None), then the drafted and the emitted token
    if they are not among them: those two are always shown."""
    stored = full.top
    texts = list(full.top_text) + [f"#{e[0]}" for e in stored[len(full.top_text) :]]
    keep = len(stored) if n is None else max(0, min(n, len(stored)))
    has_q = drafted is not None
    bars = _Columns(
        ids=[e[0] for e in stored[:keep]],
        labels=texts[:keep],
        p=_stored_p(full)[:keep],
        q=[e[2] if has_q else None for e in stored[:keep]],
    )
    for event in (drafted, emitted):
        if event is not None and event.id not in bars.ids:
            bars.ids.append(event.id)
            bars.labels.append(event.text)
            bars.p.append(_p(event))
            bars.q.append(event.q if has_q else None)
    return bars


def _min_and_excess(
    bars: _Columns, p_rest: float | None, q_rest: float | None, alpha: float | None
) -> tuple[list[float | None], list[float | None]]:
    """min(p, q) and max(0, p - q) of each bar, the rest bar's from alpha where known (the
    rest's share of sum min(p, q), and p = min + max(0, p - q))."""
    pairs = list(zip(bars.p, bars.q, strict=True))
    mins = [None if p is None or q is None else min(p, q) for p, q in pairs]
    excess = [None if p is None or q is None else max(0.0, p - q) for p, q in pairs]
    rest_min = rest_excess = None
    if alpha is not None and p_rest is not None and None not in mins:
        rest_min = min(max(0.0, alpha - sum(mins)), p_rest, q_rest if q_rest is not None else 1.0)
        rest_excess = max(0.0, p_rest - rest_min)
    return [*mins, rest_min], [*excess, rest_excess]


def position_bars(
    rnd: Round, position: int, n: int | None = None, residual_n: int | None = None
) -> PositionBars:
    """The bars of one position, with at most n tokens from the stored top-N (all if None),
    and at most residual_n (default n) from the residual's.

    `rnd` holds its top-N lists: for a session read from a file, Session.details(index)."""
    drafted, emitted = events_at(rnd, position)
    if drafted is None and emitted is None:
        raise IndexError(f"round {rnd.index} has no position {position}")
    # The event that carries the position's top-N: the drafted one, or the bonus token; the
    # emitted one where it has them (it knows p at a position whose draft was discarded).
    source = drafted if drafted is not None else emitted
    full = emitted if emitted is not None and emitted.top else source
    never_judged = full.status == "discarded"
    has_q = drafted is not None
    bars = _top_columns(full, drafted, emitted, n)
    stored_ids = [e[0] for e in full.top]
    stored_rest = full.unjudged_p_rest if never_judged else full.p_rest
    p_rest = _rest_mass(stored_rest, stored_ids, _stored_p(full), bars.ids, bars.p)
    q_rest = _rest_mass(
        source.q_rest if has_q else None, stored_ids, [e[2] for e in full.top], bars.ids, bars.q
    )
    alpha = full.alpha if not never_judged and has_q else None
    if never_judged:  # no accept test ran here: no min(p, q) and no residual's mass
        mins = excess = [None] * (len(bars.ids) + 1)
    else:
        mins, excess = _min_and_excess(bars, p_rest, q_rest, alpha)
    judged = drafted is not None and drafted.status in JUDGED
    ids = (*bars.ids, None)
    labels = (*bars.labels, REST_LABEL)
    res_ids, res_labels, res_vals, res_bar = _residual(
        emitted, ids, labels, n if residual_n is None else residual_n
    )
    return PositionBars(
        round_index=rnd.index,
        position=position,
        drafted_event=drafted,
        emitted_event=emitted,
        ids=ids,
        labels=labels,
        p=(*bars.p, p_rest),
        q=(*bars.q, q_rest),
        min_pq=tuple(mins),
        excess=tuple(excess),
        drafted_bar=ids.index(drafted.id) if drafted is not None else None,
        emitted_bar=ids.index(emitted.id) if emitted is not None else None,
        accept_prob=drafted.accept_prob if judged else None,
        u=drafted.u if judged else None,
        accepted=(drafted.status == "accepted") if judged else None,
        alpha=alpha,
        rejection_mass=None if alpha is None else max(0.0, 1.0 - alpha),
        residual_ids=res_ids,
        residual_labels=res_labels,
        residual=res_vals,
        residual_bar=res_bar,
        p_never_judged=never_judged and any(v is not None for v in bars.p),
        block=_block_at(rnd, position),
        block_kept=rnd.n_accepted if rnd.block is not None else None,
        typical_threshold=_typical_at(rnd, position),
        typical=rnd.typical is not None,
        test=_rule_test(rnd, position, drafted) if judged else None,
        round_drafted=rnd.n_drafted,
        round_stop=rnd.stop,
    )


def _rule_test(rnd: Round, position: int, drafted: TokenEvent | None) -> PositionTest | None:
    """The first of the round's extras that holds the test its rule ran here."""
    tests = (extra.position_test(rnd, position, drafted) for extra in rnd.extras.values())
    return next((test for test in tests if test is not None), None)


def _typical_at(rnd: Round, position: int) -> float | None:
    """The threshold of a typical round's judged position (core.trace.extras.typical)."""
    return None if rnd.typical is None else rnd.typical.at(position)


def _block_at(rnd: Round, position: int) -> tuple[float, float, float] | None:
    """(p_i, h_i, u_i) of a block round's drafted position (core.trace.extras.block)."""
    return None if rnd.block is None else rnd.block.at(position)
