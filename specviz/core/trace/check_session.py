"""Do a trace's numbers agree with each other and with the format's tables? Semantic checks
of a loaded Session.

specviz.core.trace.files checks structure (every field present and of the right type); this
module checks meaning: the verification rule of Leviathan et al. (arXiv:2211.17192,
Algorithm 1) as specviz.core.decoding.verify.verify applies it, the bookkeeping around it, and what
README.md's tables say each field holds (validate_tokens: one token object). Each problem
names the line of the trace file (the header is line 1; a round, the line it was read from)
and the field ("tokens[2].accept_prob"). Work and memory are bounded by the file, whatever
its numbers say.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from specviz.core.trace.check_token import check_token, expected_accept_prob
from specviz.core.trace.extras.registry import check_extras
from specviz.core.trace.records import (
    EMITTED,
    FINISH_REASONS,
    MAX_K,
    Round,
    SessionHeader,
    Settings,
    TraceError,
)
from specviz.core.trace.session import Session

__all__ = [
    "Problem", "RoundChecker", "check_session", "check_stream", "expected_accept_prob",
    "iter_problems",
]  # fmt: skip
_EMITTED = frozenset(EMITTED)


@dataclass(frozen=True)
class Problem:
    """One contradiction in a trace: where it is and what is wrong."""

    line: int  # 1-based line of the trace file: header 1, round i at i + 2 as specviz writes
    field: str  # "context_len", "tokens[2].u", "settings.k"
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: field '{self.field}': {self.message}"


@dataclass
class _SoFar:
    """What the rounds before the one being checked add up to."""

    context: int  # tokens the models had read: the prompt and every emitted token
    emitted: int = 0  # tokens generated
    emitted_ids: set[int] = field(default_factory=set)  # at most the vocabulary
    # the settings records checked, by id(): the record and its fault
    settings: dict[int, tuple[Settings, str | None]] = field(default_factory=dict)


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


class RoundChecker:
    """check_round for rounds as they arrive from an engine elsewhere (`run --connect`), each
    against the ones before it: the index due, the rule from the recorded numbers, the
    settings, the counts (what `inspect` would find in the trace they make)."""

    def __init__(self, header: SessionHeader) -> None:
        self.header = header
        self.so_far = _SoFar(context=len(header.prompt_ids))
        self.rounds = 0

    def check(self, rnd: Round) -> list[Problem]:
        line = self.rounds + 2  # as the trace will hold it
        if rnd.index != self.rounds:
            what = "a repeat" if rnd.index < self.rounds else "a gap"
            return [
                Problem(line, "index", f"round {rnd.index} where {self.rounds} was due ({what})")
            ]
        if rnd.session_id != self.header.session_id:
            return [Problem(line, "session_id", "a round of another session")]
        problems = list(
            check_round(rnd, self.header, line, self.so_far, last=rnd.finish_reason is not None)
        )
        if not problems:
            self.rounds += 1
        return problems


def check_stream(
    header: SessionHeader,
    rounds: Iterable[tuple[int, Round]],
    limit: int | None = None,
    on_round: Callable[[Round], None] | None = None,
) -> list[Problem]:
    """check_session for rounds read one at a time ((line, round) pairs, as
    core.trace.files.stream yields them, top-N lists parsed): the same checks, each round
    seen once and let go; on_round(round) after its checks (the caller's fold). Past
    `limit` problems the rounds are still read (and folded), no longer checked."""
    problems = list(check_header(header))[:limit]
    so_far = _SoFar(context=len(header.prompt_ids))
    pending = next(iter_ := iter(rounds), None)
    while pending is not None:
        following = next(iter_, None)  # one round ahead: the last round's checks differ
        line, rnd = pending
        if limit is None or len(problems) < limit:
            for problem in check_round(rnd, header, line, so_far, last=following is None):
                problems.append(problem)
                if limit is not None and len(problems) >= limit:
                    break
        if on_round is not None:
            on_round(rnd)
        pending = following
    return problems


def iter_problems(
    session: Session, top_lists: bool = True, progress: Callable[[float], None] | None = None
) -> Iterator[Problem]:
    header = session.header
    yield from check_header(header)
    so_far = _SoFar(context=len(header.prompt_ids))
    last = len(session.rounds) - 1
    step = max(len(session.rounds) // 100, 1)
    for index, rnd in enumerate(session.rounds):
        if progress is not None and index % step == 0:
            progress(index / len(session.rounds))
        lists = session.lines is None or not session.lines.deferred(index)
        if top_lists and not lists:
            try:
                rnd = session.details(index)
                lists = True
            except TraceError as e:
                yield Problem(e.line, e.field_name or "", e.reason)
        line = session.line_number(index)
        yield from check_round(rnd, header, line, so_far, last=index == last, lists=lists)
    if progress is not None:
        progress(1.0)


def vocabulary(header: SessionHeader) -> int:
    """How many token ids there are: both models' logits are cut to the smaller one, but a
    draft with a tokenizer of its own (the header's drafter has its draft_vocab) drafts
    in the target's ids."""
    if type((header.drafter or {}).get("draft_vocab")) is int:
        return header.target.vocab_size
    return min(header.target.vocab_size, header.draft.vocab_size)


def _time_fault(value: float | None) -> str | None:
    if value is None or 0 <= value < math.inf:
        return None
    return f"{value} is not a time (finite ms >= 0)"


_SESSION_ID = re.compile(r"[0-9a-f]{12}", re.ASCII)


def check_header(header: SessionHeader) -> Iterator[Problem]:
    if not _SESSION_ID.fullmatch(header.session_id):
        shown = (
            header.session_id if len(header.session_id) <= 40 else header.session_id[:37] + "..."
        )
        yield Problem(1, "session_id", f"{shown!r} is not 12 lowercase hex digits")
    try:
        header.settings.validate()
    except ValueError as e:
        yield Problem(1, "settings", str(e))
    for name in ("target", "draft"):
        if getattr(header, name).vocab_size < 1:
            yield Problem(1, f"{name}.vocab_size", "a vocabulary holds at least one token")
    vocab = vocabulary(header)
    ids = header.prompt_ids
    if not ids:
        yield Problem(1, "prompt_ids", "empty: a session starts from at least one token")
    elif not (min(ids) >= 0 and max(ids) < vocab):
        j = next(j for j, i in enumerate(ids) if not 0 <= i < vocab)
        yield Problem(1, f"prompt_ids[{j}]", f"{ids[j]} is not a token id (0 to {vocab - 1})")
    if header.prompt_text and len(header.prompt_text) != len(ids):
        yield Problem(
            1, "prompt_text", f"{len(header.prompt_text)} texts for {len(ids)} prompt_ids"
        )
    for name in ("baseline_ms_per_token", "draft_ms_per_token"):
        value = getattr(header, name)
        if value is not None and not 0 < value < math.inf:
            yield Problem(1, name, f"{value} is not a positive, finite time")
    if header.eos_token_id is not None and header.eos_token_id < 0:
        yield Problem(1, "eos_token_id", f"{header.eos_token_id} is not a token id")


def check_round(
    rnd: Round,
    header: SessionHeader,
    line: int,
    so_far: _SoFar | None = None,
    last: bool = True,
    lists: bool = True,
) -> Iterator[Problem]:
    """The problems of one round, read from `line`; so_far: what the rounds before it hold
    (updated here), None to check the round on its own; lists=False: its top-N lists were
    left unparsed (a loaded trace's), so what they hold is not checked."""
    settings = rnd.settings or header.settings
    statuses = [t.status for t in rnd.tokens]
    emitted = [t.id for t in rnd.tokens if t.status in _EMITTED]
    yield from _round_settings(rnd, header, line, so_far)
    yield from _round_numbers(rnd, statuses, settings, line, so_far)
    yield from _check_order(rnd, line)
    yield from _finish(rnd, len(emitted), settings, line, so_far, last)
    if header.eos_token_id is not None:
        yield from _eos_exact(rnd, header.eos_token_id, settings, line)
    vocab = vocabulary(header)
    constant = header.policy is None or header.policy.get("kind") == "constant"
    if constant and rnd.k is not None and rnd.k != settings.k:
        yield Problem(
            line, "k", f"{rnd.k}, but the constant policy drafts K = {settings.k} every round"
        )
    rule = settings.verifier
    for name, message in check_extras(rnd, settings, header):  # core.trace.extras
        yield Problem(line, name, message)
    for j, event in enumerate(rnd.tokens):
        for name, message in check_token(event, vocab, settings.top_n, lists, rule):
            yield Problem(line, f"tokens[{j}].{name}", message)
    if so_far is not None:
        so_far.context += len(emitted)  # the true count, so one bad value is reported once
        so_far.emitted += len(emitted)
        so_far.emitted_ids.update(emitted)


def _round_settings(
    rnd: Round, header: SessionHeader, line: int, so_far: _SoFar | None
) -> Iterator[Problem]:
    """The settings a round ran with are valid and keep the session's seed."""
    settings = rnd.settings
    if settings is None:
        return
    # Rounds share a few settings records (the reader makes one per distinct settings):
    # each is checked once, found by identity (it is kept alive with the fault).
    known = {} if so_far is None else so_far.settings
    found = known.get(id(settings))
    if found is None or found[0] is not settings:
        fault = None
        try:
            settings.validate()
        except ValueError as e:
            fault = f"settings: {e}"
        if fault is None and settings.seed != header.settings.seed:
            fault = f"settings.seed: {settings.seed}, but the session's seed is "
            fault += f"{header.settings.seed} (the seed never changes within a session)"
        found = known[id(settings)] = (settings, fault)
    fault = found[1]
    if fault is not None:
        name, message = fault.split(": ", 1)
        yield Problem(line, name, message)


def _round_numbers(
    rnd: Round, statuses: list[str], settings: Settings, line: int, so_far: _SoFar | None
) -> Iterator[Problem]:
    """Context length, times and counts agree with the tokens and the settings."""
    if so_far is not None and rnd.context_len != so_far.context:
        yield Problem(
            line,
            "context_len",
            f"{rnd.context_len}, but the prompt and the earlier rounds hold {so_far.context} "
            "tokens",
        )
    for name in ("draft_ms", "verify_ms", "events_ms"):
        fault = _time_fault(getattr(rnd, name))
        if fault is not None:
            yield Problem(line, name, fault)
    drafted = len(statuses) - statuses.count("resampled") - statuses.count("bonus")
    if rnd.tree is not None:  # a tree's nodes; its depth against K: core.trace.extras.tree
        drafted = len(rnd.tree.parent)
        if rnd.n_drafted != drafted:
            yield Problem(line, "n_drafted", f"{rnd.n_drafted}, but the tree has {drafted} nodes")
    elif rnd.n_drafted != drafted:
        yield Problem(line, "n_drafted", f"{rnd.n_drafted}, but the round lists {drafted} drafts")
    # The round's K: the policy's choice (schema 1.1), else the settings' K.
    if rnd.k is None and drafted > settings.k and rnd.tree is None:
        yield Problem(line, "n_drafted", f"{drafted} drafts, more than K = {settings.k}")
    chained = drafted if rnd.tree is None else 0  # a tree's depth is checked apart
    if rnd.k is not None and not chained <= rnd.k <= MAX_K:
        yield Problem(
            line, "k", f"{rnd.k}, but the round drafted {drafted} tokens (K is at most {MAX_K})"
        )
    accepted = statuses.count("accepted")
    if rnd.n_accepted != accepted:
        yield Problem(
            line, "n_accepted", f"{rnd.n_accepted}, but {accepted} tokens have status 'accepted'"
        )


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


def _finish(
    rnd: Round, emitted: int, settings: Settings, line: int, so_far: _SoFar | None, last: bool
) -> Iterator[Problem]:
    """finish_reason: known, on the last round only, and true: "eos" ends on an end-of-text
    token, max_new_tokens bounds what was emitted."""
    reason = rnd.finish_reason
    if reason is not None and reason not in FINISH_REASONS:
        yield Problem(
            line,
            "finish_reason",
            f"unknown finish reason {reason!r} (one of {', '.join(FINISH_REASONS)})",
        )
    elif reason is not None and not last:
        yield Problem(line, "finish_reason", f"{reason!r} on a round that is not the last")
    if reason == "eos" and settings.ignore_eos:
        yield Problem(line, "finish_reason", "'eos' in a session that ignores end-of-text")
    elif reason == "eos":
        yield from _eos(rnd, line, so_far)
    if so_far is None:
        return
    # Before a round the session had not finished; the round then drafts at most
    # max_new_tokens - 1 - (tokens so far) and emits one more (at least one).
    room = max(1, settings.max_new_tokens - so_far.emitted)
    if emitted > room:
        yield Problem(
            line,
            "tokens",
            f"{emitted} tokens emitted after {so_far.emitted}, more than max_new_tokens = "
            f"{settings.max_new_tokens} allows",
        )
    elif so_far.emitted + emitted >= settings.max_new_tokens and reason is None:
        yield Problem(
            line,
            "finish_reason",
            f"missing: {so_far.emitted + emitted} tokens reach max_new_tokens = "
            f"{settings.max_new_tokens}, which ends the session",
        )


def _eos(rnd: Round, line: int, so_far: _SoFar | None) -> Iterator[Problem]:
    """A round that ended on an end-of-text token: its last token is one it emitted (the
    resampled or bonus token, or an accepted draft after which nothing was drafted), and no
    token emitted before it was that token (the session would have ended there). Without the
    header's eos_token_id (a 1.0 trace) that is all that can be checked; with it _eos_exact
    checks the id itself."""
    last = rnd.tokens[-1] if rnd.tokens else None
    if last is None or not last.emitted:
        yield Problem(line, "finish_reason", "'eos', but the round's last token is not emitted")
        return
    earlier = [t.id for t in rnd.tokens[:-1] if t.emitted]
    if last.id in earlier or (so_far is not None and last.id in so_far.emitted_ids):
        yield Problem(
            line,
            "finish_reason",
            f"'eos', but its end-of-text token {last.id} was emitted earlier (which would "
            "have ended the session there)",
        )


def _eos_exact(rnd: Round, eos: int, settings: Settings, line: int) -> Iterator[Problem]:
    """With the header's eos_token_id (schema 1.1): a round with finish_reason "eos" ends
    with that id, and no other emitted token is that id (it ends the session) unless the
    session ignores end-of-text."""
    ends = rnd.finish_reason == "eos"
    last = len(rnd.tokens) - 1
    if ends and rnd.tokens and rnd.tokens[-1].id != eos:
        yield Problem(
            line,
            f"tokens[{last}].id",
            f"{rnd.tokens[-1].id}, but finish_reason 'eos' says the round ends on the "
            f"end-of-text token {eos} (the header's eos_token_id)",
        )
    if settings.ignore_eos:
        return
    for j, event in enumerate(rnd.tokens):
        if event.id == eos and event.status in _EMITTED and not (ends and j == last):
            yield Problem(
                line,
                f"tokens[{j}].id",
                f"the end-of-text token {eos} emitted, but the session did not end there "
                "(finish_reason 'eos' on the round it ends)",
            )
            return
