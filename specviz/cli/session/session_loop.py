"""One headless loop for every engine (core.engine.protocol.Engine): `specviz run` on the
pair in this process and `run --connect` on a served one print and write the same way.

Start the session, write the trace a round at a time (NAME.partial.jsonl, moved onto NAME
at the end), print each round, then the text and the summary. Ctrl-C stops between rounds
(a served engine's rounds already made are kept). A lost connection keeps the rounds
received, says so, and exits EXIT_LOST.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from specviz.cli.options import fail, finish_trace
from specviz.cli.terminal import printable
from specviz.core.trace.check_session import RoundChecker
from specviz.core.trace.records import drafter_notes
from specviz.core.trace.verifiers import LOSSY_WARNING

EXIT_LOST = 1


class RefusedRound(Exception):
    """A round from an engine elsewhere that the checks refused (drive(check=True))."""


@dataclass(frozen=True)
class Formats:
    """How a round and the summary read on a terminal (cli.session.run's)."""

    round: Callable[..., str]
    summary: Callable[[dict], str]


def drive(
    engine,
    args: argparse.Namespace,
    prompt: str,
    settings,
    drafting: tuple | None,
    formats: Formats,
    names: Callable[[object], dict],
    lost_errors: tuple[type[BaseException], ...] = (),
    check: bool = False,
) -> int:
    """Run one session on `engine` to its end and report it; the exit status. names(header):
    the pair as `--json` names it; lost_errors: what a lost engine raises mid-run; check:
    hold each round received to what `inspect` checks (an engine elsewhere), stopping at the
    first that fails, the rounds before it kept."""
    from specviz.core.trace.session import Session

    show = not args.quiet and not args.json
    try:
        header = _start(engine, args, prompt, settings, drafting, lost_errors)
        session = Session(header)
        _warn(header)
        live = _open_trace(args.trace, args.force, header)
        if show:
            print(printable(header.prompt), flush=True)
        checker = RoundChecker(header) if check else None
        keep = _keeper(session, live, checker, formats.round if show else None)
        interrupted, lost = _receive(engine, keep, lost_errors, live)
    except _Exit as stop:
        return stop.status
    finally:
        engine.close()
    _report(session, args, formats, names, finish_reason(session, interrupted, lost is not None))
    if lost is not None:
        _say_lost(session, lost, bool(args.trace))
    if live is not None and (status := finish_trace(live, session)) is not None:
        return status
    if lost is not None:
        return EXIT_LOST
    return 130 if interrupted else 0


class _Exit(Exception):
    """drive ends before the session's report, with this exit status (the reason printed)."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


def _start(engine, args, prompt, settings, drafting, lost_errors):
    """The session's header from engine.start; Ctrl-C or a refusal ends drive (_Exit)."""
    try:
        return engine.start(
            prompt,
            settings,
            trace=bool(args.trace),
            chat=getattr(args, "chat", None),
            drafting=drafting,
        )
    except KeyboardInterrupt:
        raise _Exit(130) from None
    except (ValueError, *lost_errors) as e:
        where = "the server could not start the session: " if lost_errors else ""
        raise _Exit(fail(f"{where}{e}")) from None


def _warn(header) -> None:
    """On stderr: a lossy rule's warning and the drafter's notes."""
    if header.settings.lossy:
        rule = header.settings.verifier
        print(f"[specviz] warning: {LOSSY_WARNING.format(rule=rule)}", file=sys.stderr)
    for note in drafter_notes(header):
        print(f"[specviz] warning: {printable(note)}", file=sys.stderr)


def _open_trace(path, force: bool, header):
    """The LiveTrace that `--trace` writes a round at a time (None without it), started."""
    from specviz.core.trace.live_file import LiveTrace

    if not path:
        return None
    live = LiveTrace(path, force=force)
    try:
        live.start(header)
    except OSError as e:
        raise _Exit(fail(f"could not write the trace: {e}")) from None
    print(
        f"[specviz] rounds are written to {printable(str(live.partial))} as they run",
        file=sys.stderr,
        flush=True,
    )
    return live


def _keeper(session, live, checker, show_round: Callable[..., str] | None) -> Callable:
    """keep(round): check it (an engine elsewhere), add it to the session, write it to the
    trace and print it; a round of another session, a repeat or a gap is dropped."""
    colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")

    def keep(rnd) -> None:
        if checker is not None and (problems := checker.check(rnd)):
            raise RefusedRound(f"the engine sent a round that is not valid: {problems[0]}")
        if not session.append(rnd):  # another session's, a repeat or a gap: not written
            return
        if live is not None:
            live.add(rnd)
        if show_round is not None:
            print(show_round(rnd, colour), flush=True)

    return keep


def _receive(engine, keep, lost_errors, live) -> tuple[bool, BaseException | None]:
    """Keep the engine's rounds to the session's end: (interrupted, what was lost if the
    engine was lost or sent a refused round). A trace that cannot be written ends drive."""
    interrupted, lost = False, None
    try:
        try:
            for rnd in engine.run():
                keep(rnd)
        except KeyboardInterrupt:
            interrupted = True
            for rnd in engine.pause():  # made before the stop reached the engine
                keep(rnd)
    except (*lost_errors, RefusedRound) as e:
        lost = e
    except OSError as e:
        if live is None:
            raise
        live.close()
        message = f"could not write the trace: {e}; the rounds so far are in {live.partial}"
        raise _Exit(fail(message)) from None
    return interrupted, lost


def _report(session, args, formats: Formats, names, finish: str | None) -> None:
    """The session's text and summary on stdout, or one JSON object with `--json`."""
    from specviz.core.metrics.running import summary

    header = session.header
    result = summary(session)
    diff = next((r.greedy_diff for r in session.rounds if r.greedy_diff is not None), None)
    if args.json:
        extra = {"dtype": header.target.dtype, "dtype_choice": header.dtype_choice,
                 "chat": header.chat, "greedy_diff": diff and diff.to_json()}  # fmt: skip
        obj = {"pair": names(header), **result, "finish_reason": finish, "text": session.text}
        print(json.dumps({**obj, **extra}))
        return
    if not args.quiet:
        print(f"\n{printable(session.text)}\n")
    print(formats.summary(result))
    print(finish_text(session, finish))
    if diff is not None:  # a greedy half-precision session left the target's text
        print(f"greedy: {printable(diff.text(header.target.dtype))}")


def _say_lost(session, lost: BaseException, traced: bool) -> None:
    """On stderr: why the engine was lost, and that the rounds received are kept."""
    n = len(session.rounds)
    print(
        f"specviz: error: {printable(str(lost))}; the {n} round{'s' if n != 1 else ''} "
        "received are kept" + (" (in the trace)" if traced else ""),
        file=sys.stderr,
    )


# Why a session stopped, in words (the trace's FINISH_REASONS, and the command's own two)
FINISH_WORDS = {
    "max_new_tokens": "it reached --max-new-tokens",
    "eos": "the target emitted end-of-text",
    "context_length": "the context is full (the shorter model's length)",
    "interrupted": "interrupted (Ctrl-C)",
    "lost": "the engine was lost",
}


def finish_reason(session, interrupted: bool, lost: bool) -> str | None:
    """The last round's finish_reason, else "interrupted" or "lost" (None: no rounds)."""
    last = session.rounds[-1].finish_reason if session.rounds else None
    if last is not None:
        return last
    return "lost" if lost else "interrupted" if interrupted else None


def finish_text(session, finish: str | None) -> str:
    """'finished: the context is full (...); 4 of the 30 new tokens asked'."""
    asked = session.header.settings.max_new_tokens
    made = sum(r.n_emitted for r in session.rounds)
    words = "no rounds" if finish is None else FINISH_WORDS.get(finish, printable(finish))
    return f"finished: {words}; {made} of the {asked} new tokens asked"
