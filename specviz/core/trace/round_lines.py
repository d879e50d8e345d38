"""The top-N lists of a loaded trace, deferred: cut out of each round line at load, kept
with the line by the session (RoundLines), and parsed for one round when a view or a check
asks (Session.details), a list at a time. What reading a line may cost in memory, and the
check that refuses one that would cost more (LineBudget).

A round's records never hold their own line: they are plain values, and the loaded session
owns what it deferred.
"""

from __future__ import annotations

import re
from array import array
from typing import Any

import orjson

from specviz.core.trace.parse import line_json, line_text, parse_round
from specviz.core.trace.records import EVENT_LISTS, Round, TraceError

# The top-N lists of a round line (top, top_text, residual_top, residual_text and, schema
# 1.2, unjudged_top_p) are four fifths of its bytes and most of its parse time, yet a view
# needs them for one position at a time. At load they are cut out of the line unparsed, the
# rest is parsed, and the line is kept in the session's RoundLines for Session.details().
# A ',"' never occurs inside a JSON string, so a key found by _LIST_KEY is a key. A list of
# [id, p, q] entries holds no string: it ends at the first "]]" if no quote comes before
# it; a list of numbers at the first "]". A list of texts is matched string by string.
# A wrong cut can only leave text that is not JSON (a value inside an object where a key
# must be), and a line whose light part is not JSON is read again whole.
_LIST_KEY = re.compile(rb',"(' + "|".join(EVENT_LISTS).encode() + rb')":\[')
_NUMBER_LISTS = (b"top", b"residual_top")
_FLAT_LISTS = (b"unjudged_top_p",)  # [p, ...]: ends at the first "]"
_STRING = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_STRING_LIST = re.compile(rb"\[(?:" + _STRING + rb"(?:," + _STRING + rb")*+)?\]")


# What reading one line may cost in memory (issue 48): at most COST_FACTOR times its size and
# COST_SLACK besides, or the line is refused, its size named. A line's text is untrusted, and
# parsed, JSON costs many times its bytes (a list 100 bytes, a float 24 and its slot, a
# token's object 500 as a TokenEvent: a 5 MB line of short entries took 36 times its size,
# `inspect` of a 5 MB round line 43). A round line's top-N lists, four fifths of its bytes,
# are parsed a list at a time (split_top_lists), each charged as it is read; the rest of a
# line is parsed whole, charged first by parse_cost, an upper bound from its bytes.
COST_FACTOR = 8  # a line may cost this many times its size in memory once read
COST_SLACK = 1 << 20  # and this much besides: a short line is never refused for its cost
# Upper bounds in bytes of what parsing whole costs per item (the parser's own copy of each
# value included): an object (a token's dict, then its TokenEvent), a list, a value (each
# one follows a comma or opens a list), a quote (half a string's object).
_OBJECT, _LIST, _VALUE, _QUOTE = 800, 100, 64, 28
# What a top-N list costs kept, per entry: an [id, p, q] tuple and three numbers, an
# [id, r] tuple and two, a number, a text (its slot; a new text, its object too).
ENTRY_COST = {3: 88 + 3 * 32, 2: 72 + 2 * 32, 1: 32, 0: 8 + 57}


def parse_cost(data: bytes) -> int:
    """An upper bound on the memory that parsing `data` whole into records takes."""
    return (
        len(data)
        + _OBJECT * data.count(b"{")
        + _LIST * data.count(b"[")
        + _VALUE * data.count(b",")
        + _QUOTE * data.count(b'"')
    )


class LineBudget:
    """The memory one line may take as it is read; `spend` raises a TraceError naming the
    line and its size once the line has cost more."""

    def __init__(self, size: int, number: int) -> None:
        self.size, self.number = size, number
        self.left = COST_FACTOR * size + COST_SLACK

    def spend(self, cost: int) -> None:
        self.left -= cost
        if self.left < 0:
            raise TraceError(
                f"a line of {self.size / 1e6:.1f} MB that would take more than "
                f"{COST_FACTOR} times its size in memory to read (denser in lists, objects, "
                "numbers or texts than a trace's lines): not read",
                self.number,
            )


def without_top_lists(raw: bytes) -> tuple[bytes, bool]:
    """A round line with its top-N lists cut out, and whether there were any. Found with
    bytes.find, not a pattern over every byte: 2.9 s instead of 4.0 s for 683 MB."""
    cut = _cut(raw, mark=False)
    return (raw, False) if cut is None else (cut[0], True)


# split_top_lists leaves `"top":-8214370000000000` (less the list's number) in a list's
# place. No line that holds these digits is split, so a placeholder is never a line's own.
_MARK = -8_214_370_000_000_000
_MARK_DIGITS = b"82143700000"


def _cut(raw: bytes, mark: bool) -> tuple[bytes, list[tuple[int, int]]] | None:
    """(the line without its top-N lists, each list's [start, end) in raw), or None if it
    has none or one cannot be cut. mark: a placeholder stands where each list stood."""
    find, kept, spans, done = raw.find, [], [], 0
    while found := _LIST_KEY.search(raw, done):
        start, end = found.span()  # end: just after the list's "["
        if found.group(1) in _NUMBER_LISTS:
            if raw[end : end + 1] != b"]":  # not "[]" (nor a line cut off after "[")
                stop = find(b"]]", end) + 1
                if stop == 0 or find(b'"', end, stop) >= 0:
                    return None
                end = stop
            end += 1
        elif found.group(1) in _FLAT_LISTS:
            stop = find(b"]", end)
            if stop < 0 or find(b'"', end, stop) >= 0:
                return None
            end = stop + 1
        else:
            texts = _STRING_LIST.match(raw, end - 1)
            if texts is None:
                return None
            end = texts.end()
        kept.append(raw[done:start])
        if mark:
            kept.append(b',"%s":%d' % (found.group(1), _MARK - len(spans)))
        spans.append((found.end() - 1, end))
        done = end
    if not kept:
        return None
    kept.append(raw[done:])
    return b"".join(kept), spans


def split_top_lists(raw: bytes, budget: LineBudget):
    """A round line as parts to parse one at a time: (the line with a placeholder for each
    top-N list, `fill`), where fill(token) is the token's object with its lists parsed, each
    list's cost spent from `budget` (where: "tokens[3]", for a message); None if the line
    has no lists to cut."""
    cut = _cut(raw, mark=True) if raw.find(_MARK_DIGITS) < 0 else None
    if cut is None:
        return None
    light, spans = cut
    low = _MARK - len(spans)

    def fill(token: Any, where: str) -> Any:
        if type(token) is not dict:
            return token
        marks = [k for k in EVENT_LISTS if type(v := token.get(k)) is int and low < v <= _MARK]
        if not marks:
            return token
        token = dict(token)
        for key in marks:
            start, end = spans[_MARK - token[key]]
            if end - start > MAX_LIST_BYTES:
                raise TraceError(
                    f"a list of {(end - start) / 1e6:.1f} MB, longer than any top-N list",
                    budget.number,
                    f"{where}.{key}",
                )
            value = _loads(raw[start:end], budget.number)
            width = _WIDTHS[key]
            budget.spend(ENTRY_COST[width] * len(value) + (end - start) * (width == 0))
            token[key] = value
        return token

    return light, fill


# A top-N list holds at most MAX_TOP_N entries of a few dozen bytes (texts a few more).
MAX_LIST_BYTES = 1 << 20
# Entries' widths for ENTRY_COST: [id, p, q], [id, r], numbers, texts.
_WIDTHS = {"top": 3, "residual_top": 2, "unjudged_top_p": 1, "top_text": 0, "residual_text": 0}


def _loads(data: bytes, number: int) -> Any:
    """A part of a line as JSON: orjson, or json where orjson refuses (NaN) or to name the
    fault."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return line_json(line_text(data, number), number)


def read_round(raw: bytes, number: int, session_id: str, settings_cache=None) -> Round | None:
    """A round line read in parts (split_top_lists), within its LineBudget; None if it is
    not one to read so (no lists to cut, or its light part is not a round's JSON)."""
    budget = LineBudget(len(raw), number)
    split = split_top_lists(raw, budget)
    if split is None:
        return None
    light, fill = split
    budget.spend(parse_cost(light))
    try:
        obj = orjson.loads(light)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict or obj.get("type") != "round":
        return None
    return parse_round(obj, session_id, number, settings_cache, fill=fill)


class RoundLines:
    """Where a loaded session's rounds came from: each round's line number, and the line
    itself (bytes, as read) where its top-N lists were left unparsed. 16 bytes a round
    besides the lines; the lines are about 1.6 times the file (benchmarks/trace_load.py)."""

    def __init__(self) -> None:
        self._numbers = array("q")  # round i was read from line _numbers[i]
        self._raw: list[bytes | None] = []  # its line, if its lists were cut out at load

    def add(self, number: int, raw: bytes | None) -> None:
        """The next round was read from line `number`; raw: the line, if its lists were cut."""
        self._numbers.append(number)
        self._raw.append(raw)

    def __len__(self) -> int:
        return len(self._numbers)

    def number(self, index: int) -> int | None:
        """The line round `index` was read from; None for a round added since."""
        return self._numbers[index] if 0 <= index < len(self._numbers) else None

    def deferred(self, index: int) -> bool:
        """Whether round `index` was read without its top-N lists (details() has them)."""
        return 0 <= index < len(self._raw) and self._raw[index] is not None

    def text(self, index: int) -> str | None:
        """The line of round `index` as it was read, for writing it back unchanged (fields
        of a newer version kept, nothing parsed); None if the round was parsed whole."""
        raw = self._raw[index] if 0 <= index < len(self._raw) else None
        if raw is None:
            return None
        try:
            return raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            return None  # written from the record instead

    def details(self, rnd: Round) -> Round:
        """`rnd` with its top-N lists: its line parsed again, a list at a time (about a
        millisecond; nothing cached). TraceError, naming the line and the field, if the
        lists are bad or would cost more than the line's LineBudget."""
        raw = self._raw[rnd.index] if 0 <= rnd.index < len(self._raw) else None
        if raw is None:
            return rnd
        number = self._numbers[rnd.index]
        found = read_round(raw, number, rnd.session_id)
        if found is not None:
            return found
        budget = LineBudget(len(raw), number)
        budget.spend(parse_cost(raw))
        return parse_round(_loads(raw, number), rnd.session_id, number)
