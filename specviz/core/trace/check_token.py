"""The invariants of one token object of a trace (README.md, Token objects): its numbers,
which of them its status carries, its ids, its top-N lists, and the verdict of the rule.

Each check yields (field, message) pairs, the field relative to the token ("p",
"top[3]"); specviz.core.trace.check_session adds the line and the token's place. Written for speed:
a 100k-round trace holds half a million tokens and (K+1) * top-N entries a round, so list
checks are C-level passes over columns, and a column is walked entry by entry only to
name the entry that broke a rule.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import partial
from itertools import islice
from operator import ge, is_not, itemgetter

from specviz.core.trace import verifiers
from specviz.core.trace.records import (
    EVENT_NUMBERS,
    JUDGED,
    NUMBERS_BY_STATUS,
    PROBABILITIES,
    TRIED,
    UNJUDGED,
    TokenEvent,
)

# accept_prob is min(1, p/q) computed in float64 from the stored p and q; a relative error
# above this means it was not. Probabilities are float32 sums, so [0, 1] gets the same slack.
REL_TOL = 1e-6
PROB_TOL = 1e-5
# p_rest and q_rest go with p and q: absent where the number they complete is.
_REST_OF = {"p_rest": "p", "q_rest": "q"}
# Which columns of `top` a status fills: [id, p, q]; p is null at a discarded position (never
# judged), q at a bonus one (nothing drafted there).
_TOP_COLUMNS = {"discarded": (False, True), "bonus": (True, False)}
# Schema 1.2: the target's numbers at a position it never judged, on discarded tokens only.
_UNJUDGED_NUMBERS = frozenset(name for name in UNJUDGED if name in EVENT_NUMBERS)
# Schema 1.9: what a judged token was tested against, where it is not p and q themselves.
_TRIED_NUMBERS = frozenset(TRIED)
# Per status: the numbers it must carry, and the numbers it may carry.
_BY_STATUS = {
    status: (
        frozenset(present),
        frozenset(name for name in EVENT_NUMBERS if _REST_OF.get(name, name) in present)
        | (_UNJUDGED_NUMBERS if status == "discarded" else frozenset())
        | (_TRIED_NUMBERS if status in JUDGED else frozenset()),
    )
    for status, present in NUMBERS_BY_STATUS.items()
}
Found = Iterator[tuple[str, str]]


def expected_accept_prob(p: float, q: float) -> float:
    """min(1, p/q); for q = 0 the ratio is infinite: 1 if p > 0 else 0 (as verify() does)."""
    if q > 0:
        return min(1.0, p / q)
    return 1.0 if p > 0 else 0.0


def check_token(
    event: TokenEvent, vocab: int, top_n: int, lists: bool = True, rule: str = "token"
) -> list[tuple[str, str]]:
    """Every problem of one token: vocab bounds its ids, top_n its lists' lengths. A token
    that passes a step's quick test (a few set and C-level operations) skips the step: the
    checks on opening a trace run on half a million tokens. lists=False: the token's top-N
    lists were left unparsed (a loaded trace's, Session.lines), so it cannot tell whether
    it has any. rule: the round's verifier; under "block" a token's fate is the block's (its
    round's `block` numbers, checked by check_session), not u against its own min(1, p/q)
    (VerifierSpec.token_fates)."""
    found: list[tuple[str, str]] = []
    fields = vars(event)
    given = {name for name in EVENT_NUMBERS if fields[name] is not None}
    required, allowed = _BY_STATUS[event.status]
    discarded = event.status == "discarded"
    if (
        not required <= given <= allowed
        or (event.status != "resampled" and event.residual_top)
        or (not discarded and event.unjudged_top_p)
    ):
        found += _fields_by_status(event)
    values = [fields[name] for name in given if name != "u"]
    u = fields["u"]
    if (
        values
        and not (min(values) >= -PROB_TOL and max(values) <= 1 + PROB_TOL)
        or sum(values) != sum(values)  # NaN
        or (u is not None and not 0 <= u <= 1)
    ):
        found += _numbers(event)
    if not 0 <= event.id < vocab:
        found.append(("id", f"{event.id} is not a token id (0 to {vocab - 1}: the vocabulary)"))
    if event.top:
        found += _ids(event, vocab)
        found += _top(event, top_n)
    elif lists and (fields["p_rest"] is not None or fields["q_rest"] is not None):
        found += _rest_without_top(event)
    if discarded and (event.unjudged_top_p or fields["unjudged_p_rest"] is not None):
        found += _unjudged(event, lists)
    if event.residual_top:
        found += _residual_top(event, top_n)
    if event.status in JUDGED and (verdict := _verdict(event, rule)) is not None:
        found.append(verdict)
    return found


def _fields_by_status(event: TokenEvent) -> Found:
    """The numbers a token of its status carries are there, and the others are not."""
    allowed = _BY_STATUS[event.status][1]
    for name in NUMBERS_BY_STATUS[event.status]:
        if getattr(event, name) is None:
            yield name, f"missing on a '{event.status}' token"
            return
    for name in EVENT_NUMBERS:
        if name not in allowed and getattr(event, name) is not None:
            if name in _UNJUDGED_NUMBERS:
                yield name, f"present on a '{event.status}' token (discarded tokens only)"
            elif name in _TRIED_NUMBERS:
                yield name, f"present on a '{event.status}' token (judged tokens only)"
            else:
                yield name, f"present on a '{event.status}' token, which has none"
            return
    if event.status != "resampled":
        for name in ("residual_top", "residual_text"):
            if getattr(event, name):
                yield name, f"present on a '{event.status}' token (resampled tokens only)"
    if event.status != "discarded" and event.unjudged_top_p:
        yield "unjudged_top_p", f"present on a '{event.status}' token (discarded tokens only)"


def _rest_without_top(event: TokenEvent) -> Found:
    """p_rest and q_rest are the mass outside `top`: without a top list they mean nothing."""
    for name in ("p_rest", "q_rest"):
        if getattr(event, name) is not None:
            yield name, "present without a top list (it is the mass outside `top`)"


def _in_unit(value: float | None, slack: float = PROB_TOL) -> bool:
    return value is None or -slack <= value <= 1 + slack  # False for NaN


def _numbers(event: TokenEvent) -> Found:
    for name in PROBABILITIES:
        value = getattr(event, name)
        if not _in_unit(value):
            yield name, f"{value} is not a probability in [0, 1]"
    if event.u is not None and not 0 <= event.u <= 1:
        yield "u", f"{event.u} is not a uniform draw in [0, 1)"


def _ids(event: TokenEvent, vocab: int) -> Found:
    for name in ("top", "residual_top"):
        ids = _column(getattr(event, name), 0)
        if ids and not (min(ids) >= 0 and max(ids) < vocab):
            j = next(j for j, i in enumerate(ids) if not 0 <= i < vocab)
            yield f"{name}[{j}]", f"{ids[j]} is not a token id (0 to {vocab - 1})"


def _column(entries: tuple[tuple, ...], column: int) -> list:
    return list(map(itemgetter(column), entries))


def _column_in_unit(values: list) -> bool:
    """All non-null values in [0, 1] (and none NaN), in C-level passes."""
    values = list(filter(partial(is_not, None), values))
    return not values or (
        min(values) >= -PROB_TOL and max(values) <= 1 + PROB_TOL and sum(values) == sum(values)
    )


def _descending(keys: list) -> bool:
    return all(map(ge, keys, islice(keys, 1, None)))


def _top(event: TokenEvent, top_n: int) -> Found:
    """[[id, p, q], ...]: at most top_n entries, the columns its status fills (and no other),
    probabilities, most likely first (by max(p, q), or by p at a bonus position; at a
    discarded one by max(unjudged_top_p, q) where it is given), a text for each entry."""
    top = event.top
    if not top:
        return
    if len(top) > top_n:
        yield "top", f"{len(top)} entries, more than top_n = {top_n}"
    ps, qs = _column(top, 1), _column(top, 2)
    has_p, has_q = _TOP_COLUMNS.get(event.status, (True, True))
    for column, values, filled in ((1, ps, has_p), (2, qs, has_q)):
        name = "pq"[column - 1]
        nulls = values.count(None)
        if filled and nulls:
            j = values.index(None)
            yield f"top[{j}]", f"{name} is null at a '{event.status}' token's position"
            return
        if not filled and nulls != len(values):
            j = next(j for j, v in enumerate(values) if v is not None)
            yield f"top[{j}]", f"{name} is given at a '{event.status}' token's position"
            return
    if not (_column_in_unit(ps) and _column_in_unit(qs)):
        j = next(j for j, e in enumerate(top) if not (_in_unit(e[1]) and _in_unit(e[2])))
        yield f"top[{j}]", f"[p, q] = [{top[j][1]}, {top[j][2]}] not in [0, 1]"
        return
    if event.status == "discarded":  # p is in unjudged_top_p (schema 1.2), if anywhere
        ps = list(event.unjudged_top_p)
        if len(ps) != len(top) or None in ps or not _column_in_unit(ps):
            ps = None  # unknown (a 1.1 trace), or named by _unjudged
    if ps is not None:  # most likely first by max(p, q); p unknown: the order is too
        keys = ps if not has_q else list(map(max, ps, qs))
        if not _descending(keys):
            j = next(j for j in range(1, len(keys)) if keys[j] > keys[j - 1])
            yield f"top[{j}]", "more likely than the entry before it (most likely first)"
    if event.top_text and len(event.top_text) != len(top):
        yield "top_text", f"{len(event.top_text)} texts for {len(top)} entries"


def _unjudged(event: TokenEvent, lists: bool) -> Found:
    """Schema 1.2 on a discarded token: unjudged_top_p holds one probability per `top` entry
    (its order is checked with `top`'s), the token's own entry is unjudged_p, and
    unjudged_p_rest, the mass outside the list, comes with it; all with unjudged_p."""
    ps, top = list(event.unjudged_top_p), event.top
    if event.unjudged_p is None:
        name = "unjudged_top_p" if ps else "unjudged_p_rest"
        yield name, "present without unjudged_p (the target's p of the token itself)"
        return
    if not lists:  # the lists were left unparsed: nothing more to check
        return
    if event.unjudged_p_rest is not None and not ps:
        yield "unjudged_p_rest", "present without unjudged_top_p (the rest is outside it)"
        return
    if not ps:
        return
    if len(ps) != len(top):
        yield "unjudged_top_p", f"{len(ps)} values for {len(top)} entries of `top`"
        return
    if None in ps or not _column_in_unit(ps):
        j = next(j for j, v in enumerate(ps) if v is None or not _in_unit(v))
        yield f"unjudged_top_p[{j}]", f"{ps[j]} is not a probability in [0, 1]"
        return
    if not _in_unit(event.unjudged_p):
        return  # named by _numbers
    for j, entry in enumerate(top):
        if entry[0] == event.id and not _close(ps[j], event.unjudged_p):
            yield (
                f"unjudged_top_p[{j}]",
                f"{ps[j]!r}, but the token's own unjudged_p is {event.unjudged_p!r}",
            )


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL_TOL * abs(b) + 1e-12


def _residual_top(event: TokenEvent, top_n: int) -> Found:
    """[[id, r], ...] of the residual a resampled token was drawn from: at most top_n,
    probabilities, most likely first, a text for each."""
    entries = event.residual_top
    if not entries:
        return
    if len(entries) > top_n:
        yield "residual_top", f"{len(entries)} entries, more than top_n = {top_n}"
    values = _column(entries, 1)
    if None in values or not _column_in_unit(values):
        j = next(j for j, v in enumerate(values) if v is None or not _in_unit(v))
        yield f"residual_top[{j}]", f"{values[j]} is not a probability in [0, 1]"
        return
    if not _descending(values):
        j = next(j for j in range(1, len(values)) if values[j] > values[j - 1])
        yield f"residual_top[{j}]", "more likely than the entry before it: not sorted"
    if event.residual_text and len(event.residual_text) != len(entries):
        yield "residual_text", f"{len(event.residual_text)} texts for {len(entries)} entries"


def _verdict(event: TokenEvent, rule: str = "token") -> tuple[str, str] | None:
    """accept_prob = min(1, p/q), or min(1, p_tried/q_tried) where the token carries what it
    was tested against (schema 1.9: q_tried only with p_tried, q where it is absent), and
    (token-wise) the status the draw u gives."""
    p, q, accept_prob, u = event.p, event.q, event.accept_prob, event.u
    if p is None or q is None or accept_prob is None or u is None:
        return None  # named by _fields_by_status
    names = "p/q"
    if event.p_tried is not None:
        p, names = event.p_tried, "p_tried/q"
        if event.q_tried is not None:
            q, names = event.q_tried, "p_tried/q_tried"
    elif event.q_tried is not None:
        return "q_tried", "present without p_tried (the p its test used)"
    if not (math.isfinite(p) and math.isfinite(q)):
        return None  # named by _numbers
    expected = expected_accept_prob(p, q)
    if not abs(accept_prob - expected) <= REL_TOL * abs(expected) + 1e-12:
        return (
            "accept_prob",
            f"{accept_prob!r}, but min(1, {names}) = min(1, {p!r}/{q!r}) = {expected!r}",
        )
    if not verifiers.token_fates(rule):  # the round's rule numbers decide (core.trace.extras)
        return None
    if event.status == "accepted" and not u < accept_prob:
        return (
            "u",
            f"{u!r} >= accept_prob {accept_prob!r}, so the token was rejected, but its status "
            "is 'accepted'",
        )
    if event.status == "rejected" and not u >= accept_prob:
        return (
            "u",
            f"{u!r} < accept_prob {accept_prob!r}, so the token was accepted, but its status "
            "is 'rejected'",
        )
    return None
