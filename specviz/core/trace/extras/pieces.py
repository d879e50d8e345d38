"""A bridged round's draft pieces (schema 1.8, --vocab-bridge; core.drafters.bridge.recut): the
drafted text as the draft's own tokenizer cut it, and where those pieces fall among the
round's drafted tokens; grouped where the two cuts differ (DraftPieces.groups).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specviz.core.trace.extras.base import Extra, Found
from specviz.core.trace.records import MAX_K, Round, SessionHeader, Settings, TraceError

MAX_PIECE_TEXT = 1000  # characters of one draft piece's text (one token's), at most


@dataclass(frozen=True)
class DraftPieces(Extra):
    """{"ids": the draft's token ids, "text": each one's text, "target": per piece [start,
    end), the drafted tokens (tokens[start:end]) its characters fall in}: at most MAX_K
    pieces, the ranges in order."""

    key = "draft_pieces"
    since = (1, 8)

    ids: tuple[int, ...]
    text: tuple[str, ...]
    target: tuple[tuple[int, int], ...]

    @classmethod
    def from_json(cls, value: dict[str, Any], line: int | None) -> DraftPieces:
        where = "draft_pieces"
        if set(value) != {"ids", "text", "target"}:
            raise TraceError("expected the fields ids, text, target", line, where)
        ids, text, target = value["ids"], value["text"], value["target"]
        for name, v in (("ids", ids), ("text", text), ("target", target)):
            if type(v) is not list or len(v) > MAX_K:
                raise TraceError(f"expected a list of at most {MAX_K}", line, f"{where}.{name}")
        if not len(ids) == len(text) == len(target):
            raise TraceError("ids, text and target must have one entry per piece", line, where)
        if not all(type(i) is int and i >= 0 for i in ids):
            raise TraceError("expected token ids (integers >= 0)", line, f"{where}.ids")
        if not all(type(t) is str and len(t) <= MAX_PIECE_TEXT for t in text):
            raise TraceError(f"expected texts of at most {MAX_PIECE_TEXT} characters", line,
                             f"{where}.text")  # fmt: skip
        last = [0, 0]
        for i, span in enumerate(target):
            if (type(span) is not list or len(span) != 2 or not all(type(x) is int for x in span)
                    or not last[0] <= span[0] <= span[1] or span[1] < last[1]):  # fmt: skip
                raise TraceError("expected a [start, end] range, 0 <= start <= end, after the "
                                 "one before", line, f"{where}.target[{i}]")  # fmt: skip
            last = span
        return cls.from_value(value)

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> DraftPieces:
        """The bridge's record (core.drafters.bridge.recut)."""
        return cls(tuple(value["ids"]), tuple(value["text"]),
                   tuple((a, b) for a, b in value["target"]))  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {"ids": list(self.ids), "text": list(self.text),
                "target": [[a, b] for a, b in self.target]}  # fmt: skip

    @classmethod
    def check(cls, rnd: Round, settings: Settings, header: SessionHeader) -> Found:
        """The pieces hold ids of the draft's vocabulary and ranges within the round's
        drafted tokens, of a chain."""
        pieces = rnd.draft_pieces
        if pieces is None:
            return
        if rnd.tree is not None:
            yield "draft_pieces", "in a token tree's round (a bridged draft drafts chains)"
        draft_vocab = header.draft.vocab_size
        ids = pieces.ids
        bad = next((i for i, x in enumerate(ids) if not 0 <= x < draft_vocab), None)
        if bad is not None:
            yield (f"draft_pieces.ids[{bad}]",
                   f"{ids[bad]} is not a draft token id (0 to {draft_vocab - 1})")  # fmt: skip
        end = max((span[1] for span in pieces.target), default=0)
        if end > rnd.n_drafted:
            yield (
                "draft_pieces.target",
                (f"reaches token {end}, but the round drafted {rnd.n_drafted}"),
            )

    def groups(self, n_drafted: int) -> list[tuple[int, int, int, int]]:
        """The pieces and drafted tokens in groups that cover the same text, in order:
        (first piece, end piece, first token, end token). The two cuts agree on a group of
        one piece and one token and differ on any other: several on either side, a piece
        without a token (past what the round proposed) or a token without a piece (the
        end-of-text the bridge adds). Every piece and every drafted token is in one group;
        ranges past n_drafted (a trace not checked) are cut to it."""
        spans = [(min(max(a, 0), n_drafted), min(max(b, 0), n_drafted)) for a, b in self.target]
        groups: list[tuple[int, int, int, int]] = []
        done = i = 0  # tokens grouped so far; the next piece
        while i < len(spans):
            start = max(spans[i][0], done)
            end = max(spans[i][1], start)
            j = i + 1
            while j < len(spans) and spans[j][0] < end:  # shares a token with the group
                end = max(end, spans[j][1])
                j += 1
            if start > done:  # tokens no piece covers
                groups.append((i, i, done, start))
            groups.append((i, j, start, end))
            done, i = end, j
        if done < n_drafted:
            groups.append((len(spans), len(spans), done, n_drafted))
        return groups
