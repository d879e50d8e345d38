"""The top-N lists of a loaded trace, deferred: cut out of each round line at load, kept
with the line by the session (RoundLines), and parsed for one round when a view or a check
asks (Session.details).

A round's records never hold their own line: they are plain values, and the loaded session
owns what it deferred.
"""

from __future__ import annotations

import re
from array import array

import orjson

from specviz.core.trace.parse import line_json, line_text, parse_round
from specviz.core.trace.records import EVENT_LISTS, Round

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


def without_top_lists(raw: bytes) -> tuple[bytes, bool]:
    """A round line with its top-N lists cut out, and whether there were any. Found with
    bytes.find, not a pattern over every byte: 2.9 s instead of 4.0 s for 683 MB."""
    find, kept, done = raw.find, [], 0
    while found := _LIST_KEY.search(raw, done):
        start, end = found.span()  # end: just after the list's "["
        if found.group(1) in _NUMBER_LISTS:
            if raw[end : end + 1] != b"]":  # not "[]" (nor a line cut off after "[")
                stop = find(b"]]", end) + 1
                if stop == 0 or find(b'"', end, stop) >= 0:
                    return raw, False
                end = stop
            end += 1
        elif found.group(1) in _FLAT_LISTS:
            stop = find(b"]", end)
            if stop < 0 or find(b'"', end, stop) >= 0:
                return raw, False
            end = stop + 1
        else:
            texts = _STRING_LIST.match(raw, end - 1)
            if texts is None:
                return raw, False
            end = texts.end()
        kept.append(raw[done:start])
        done = end
    if not kept:
        return raw, False
    kept.append(raw[done:])
    return b"".join(kept), True


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
        """`rnd` with its top-N lists: its line parsed again whole (about a millisecond;
        nothing cached). TraceError, naming the line and the field, if the lists are bad."""
        raw = self._raw[rnd.index] if 0 <= rnd.index < len(self._raw) else None
        if raw is None:
            return rnd
        number = self._numbers[rnd.index]
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:  # json reads NaN, which orjson refuses, or names it
            obj = line_json(line_text(raw, number), number)
        return parse_round(obj, rnd.session_id, number)
