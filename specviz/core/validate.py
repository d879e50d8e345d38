"""Do a trace's numbers agree with each other? Semantic checks of a loaded Session.

specviz.core.tracefile checks structure (every field present and of the right type); this
module checks meaning: the verification rule of Leviathan et al. (arXiv:2211.17002,
Algorithm 1) as specviz.core.sampling.verify applies it, and the bookkeeping around it.
Each problem names the line of the trace file as specviz writes it (the header is line 1,
round i is line i + 2) and the field ("tokens[2].accept_prob").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from operator import is_not, itemgetter

from .session import Session
from .trace import Round, SessionHeader, TokenEvent, TraceError

# accept_prob is min(1, p/q) computed in float64 from the stored p and q; a relative error
# above this means it was not. Probabilities are float32 sums, so [0, 1] gets the same slack.
REL_TOL = 1e-6
PROB_TOL = 1e-5
JUDGED = ("accepted", "rejected")
DRAFTED = ("accepted", "rejected", "discarded")
_PROBABILITIES = ("p", "q", "accept_prob", "alpha", "residual", "p_rest", "q_rest")


@dataclass(frozen=True)
class Problem:
    """One contradiction in a trace: where it is and what is wrong."""

    line: int  # 1-based line of the trace file: header 1, round i at i + 2
    field: str  # "context_len", "tokens[2].u", "settings.k"
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: field '{self.field}': {self.message}"


def expected_accept_prob(p: float, q: float) -> float:
    """min(1, p/q); for q = 0 the ratio is infinite: 1 if p > 0 else 0 (as verify() does)."""
    if q > 0:
        return min(1.0, p / q)
    return 1.0 if p > 0 else 0.0


def _in_unit(value: float | None, slack: float = PROB_TOL) -> bool:
    return value is None or -slack <= value <= 1 + slack  # False for NaN


def _column_in_unit(entries: tuple[tuple, ...], *columns: int) -> bool:
    """All non-null values of these columns in [0, 1] (and none NaN), in C-level passes:
    a round holds (K+1) * top-N entries."""
    for column in columns:
        values = list(filter(partial(is_not, None), map(itemgetter(column), entries)))
        if values and not (
            min(values) >= -PROB_TOL and max(values) <= 1 + PROB_TOL and sum(values) == sum(values)
        ):
            return False
    return True


def check_session(
    session: Session,
    limit: int | None = None,
    top_lists: bool = True,
    progress: Callable[[float], None] | None = None,
) -> list[Problem]:
    """Every problem in the session, in file order (at most `limit` of them).

    top_lists=False skips the top-N lists that a loaded trace keeps unparsed (Session.lines):
    checking them parses each round's line again, which takes as long as loading it.
    progress(fraction of the rounds checked) is called about every 1% and at the end."""
    problems: list[Problem] = []
    for problem in iter_problems(session, top_lists, progress):
        problems.append(problem)
        if limit is not None and len(problems) >= limit:
            break
    return problems


def iter_problems(
    session: Session, top_lists: bool = True, progress: Callable[[float], None] | None = None
) -> Iterator[Problem]:
    header = session.header
    yield from check_header(header)
    context = len(header.prompt_ids)
    last = len(session.rounds) - 1
    step = max(len(session.rounds) // 100, 1)
    for index, rnd in enumerate(session.rounds):
        if progress is not None and index % step == 0:
            progress(index / len(session.rounds))
        if top_lists and session.lines is not None:
            try:
                rnd = session.details(index)
            except TraceError as e:
                yield Problem(e.line, e.field_name or "", e.reason)
        line = session.line_number(index)
        yield from check_round(rnd, header, line, expected_context=context, last=index == last)
        context += rnd.n_emitted  # the true count, so one bad value is reported once
    if progress is not None:
        progress(1.0)


def check_header(header: SessionHeader) -> Iterator[Problem]:
    try:
        header.settings.validate()
    except ValueError as e:
        yield Problem(1, "settings", str(e))
    if not header.prompt_ids:
        yield Problem(1, "prompt_ids", "empty: a session starts from at least one token")
    if header.prompt_text and len(header.prompt_text) != len(header.prompt_ids):
        yield Problem(
            1,
            "prompt_text",
            f"{len(header.prompt_text)} texts for {len(header.prompt_ids)} prompt_ids",
        )
    for name in ("baseline_ms_per_token", "draft_ms_per_token"):
        value = getattr(header, name)
        if value is not None and not value > 0:
            yield Problem(1, name, f"{value} is not a positive time")


def check_round(
    rnd: Round,
    header: SessionHeader,
    line: int,
    expected_context: int | None = None,
    last: bool = True,
) -> Iterator[Problem]:
    """The problems of one round, read from `line`; expected_context is the running token
    count before it."""
    if expected_context is not None and rnd.context_len != expected_context:
        yield Problem(
            line,
            "context_len",
            f"{rnd.context_len}, but the prompt and the earlier rounds hold {expected_context} "
            "tokens",
        )
    for name in ("draft_ms", "verify_ms"):
        value = getattr(rnd, name)
        if not value >= 0:
            yield Problem(line, name, f"{value} is not a time (ms >= 0)")
    drafted = sum(1 for t in rnd.tokens if t.status in DRAFTED)
    if rnd.n_drafted != drafted:
        yield Problem(line, "n_drafted", f"{rnd.n_drafted}, but the round lists {drafted} drafts")
    k = (rnd.settings or header.settings).k
    if rnd.n_drafted > k:
        yield Problem(line, "n_drafted", f"{rnd.n_drafted} drafts, more than K = {k}")
    accepted = sum(1 for t in rnd.tokens if t.status == "accepted")
    if rnd.n_accepted != accepted:
        yield Problem(
            line, "n_accepted", f"{rnd.n_accepted}, but {accepted} tokens have status 'accepted'"
        )
    if rnd.finish_reason is not None and not last:
        yield Problem(
            line, "finish_reason", f"{rnd.finish_reason!r} on a round that is not the last"
        )
    yield from _check_order(rnd, line)
    for j, event in enumerate(rnd.tokens):
        yield from check_event(event, line, f"tokens[{j}]")


def _check_order(rnd: Round, line: int) -> Iterator[Problem]:
    """accepted*, then at most one rejected, then discarded*, then one resampled (after a
    rejection) or one bonus (after all accepted). A round ended by EOS may stop early."""
    state = "accepting"  # -> "rejected" -> "done"
    for j, event in enumerate(rnd.tokens):
        status, where = event.status, f"tokens[{j}].status"
        if state == "done":
            yield Problem(line, where, f"'{status}' after the round's last token")
            return
        wrong = None
        if status == "accepted" and state != "accepting":
            wrong = "'accepted' after a rejection"
        elif status == "rejected":
            wrong = None if state == "accepting" else "a second 'rejected' in one round"
            state = "rejected"
        elif status == "discarded" and state != "rejected":
            wrong = "'discarded' without a rejection before it"
        elif status == "resampled":
            wrong = None if state == "rejected" else "'resampled' without a rejection"
            state = "done"
        elif status == "bonus":
            wrong = None if state == "accepting" else "'bonus' after a rejection"
            state = "done"
        if wrong:
            yield Problem(line, where, wrong)
            return
    if state != "done" and rnd.finish_reason != "eos":
        ending = "resampled" if state == "rejected" else "bonus"
        yield Problem(line, "tokens", f"the round does not end with a '{ending}' token")


def check_event(event: TokenEvent, line: int, where: str) -> Iterator[Problem]:
    for name in _PROBABILITIES:
        value = getattr(event, name)
        if not _in_unit(value):
            yield Problem(line, f"{where}.{name}", f"{value} is not a probability in [0, 1]")
    if event.u is not None and not 0 <= event.u <= 1:
        yield Problem(line, f"{where}.u", f"{event.u} is not a uniform draw in [0, 1)")
    if event.top and not _column_in_unit(event.top, 1, 2):
        j = next(j for j, e in enumerate(event.top) if not (_in_unit(e[1]) and _in_unit(e[2])))
        p, q = event.top[j][1:]
        yield Problem(line, f"{where}.top[{j}]", f"[p, q] = [{p}, {q}] not in [0, 1]")
    if event.residual_top and not _column_in_unit(event.residual_top, 1):
        j = next(j for j, e in enumerate(event.residual_top) if not _in_unit(e[1]))
        r = event.residual_top[j][1]
        yield Problem(line, f"{where}.residual_top[{j}]", f"{r} is not in [0, 1]")
    if event.residual_text and len(event.residual_text) != len(event.residual_top):
        yield Problem(
            line,
            f"{where}.residual_text",
            f"{len(event.residual_text)} texts for {len(event.residual_top)} entries",
        )
    if event.top_text and len(event.top_text) != len(event.top):
        yield Problem(
            line, f"{where}.top_text", f"{len(event.top_text)} texts for {len(event.top)} entries"
        )
    if event.status not in JUDGED:
        return
    missing = [n for n in ("p", "q", "accept_prob", "u") if getattr(event, n) is None]
    if missing:
        yield Problem(line, f"{where}.{missing[0]}", f"missing on a '{event.status}' token")
        return
    expected = expected_accept_prob(event.p, event.q)
    if not abs(event.accept_prob - expected) <= REL_TOL * abs(expected) + 1e-12:
        yield Problem(
            line,
            f"{where}.accept_prob",
            f"{event.accept_prob!r}, but min(1, p/q) = min(1, {event.p!r}/{event.q!r}) "
            f"= {expected!r}",
        )
    elif event.status == "accepted" and not event.u < event.accept_prob:
        yield Problem(
            line,
            f"{where}.u",
            f"{event.u!r} >= accept_prob {event.accept_prob!r}, so the token was rejected, "
            "but its status is 'accepted'",
        )
    elif event.status == "rejected" and not event.u >= event.accept_prob:
        yield Problem(
            line,
            f"{where}.u",
            f"{event.u!r} < accept_prob {event.accept_prob!r}, so the token was accepted, "
            "but its status is 'rejected'",
        )
