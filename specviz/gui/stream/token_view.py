"""The coloured token stream: the prompt, then every round as "drafts -> verdict".

Rounds are appended at the end of the document (never rebuilt), so a session of thousands
of rounds stays fast. Each token's span is remembered for hover and click. GUI thread only.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from PySide6.QtCore import QEvent, QPoint, Qt, Signal
from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor, QTextFormat
from PySide6.QtWidgets import QTextEdit, QToolTip, QWidget

from specviz.core.metrics.position_bars import position_of, tokens_at
from specviz.core.trace import verifiers
from specviz.core.trace.records import DRAFTED, Round, SessionHeader
from specviz.core.trace.rule_numbers import kept_beyond_token_stop, token_wise_stop
from specviz.core.trace.tree_nodes import tree_levels
from specviz.gui import palette
from specviz.gui.stream.figures import fmt, fmt_pair

BOUNDARY_MARK = palette.BOUNDARY_MARK
ROUND_TOKEN = -1  # token index of a round's boundary mark


def display_text(text: str) -> str:
    """A token as it is shown: line breaks visible (and kept), empty tokens visible."""
    if text == "":
        return "\u2205"  # ∅
    if not text.strip(" "):
        return "\u2423" * len(text)  # ␣ for a token of spaces only
    return text.replace("\n", "\u21b5\n")  # ↵ then the real line break


def qt_length(text: str) -> int:
    """Length in a QTextDocument: UTF-16 code units ("\n" becomes one paragraph mark)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2


def token_tooltip(rnd: Round, index: int) -> str:
    """The hover text of a token: its fate and the numbers the round recorded for it."""
    event = rnd.tokens[index]
    position = position_of(rnd, index)
    # unjudged: a discarded token's p from the target's pass (schema 1.2), never judged
    p_label, p = ("p (target)", event.p)
    if event.unjudged_p is not None:
        p_label, p = ("p (target, never judged)", event.unjudged_p)
    lines = [
        f"<b>{_html(repr(event.text))}</b> &nbsp; {event.status} "
        f"(round {rnd.index + 1}, position {position + 1})",
        f"{p_label} = {fmt(p)} &nbsp; q (draft) = {fmt(event.q)}",
    ]
    rule = rnd.settings.verifier if rnd.settings is not None else "token"
    if event.accept_prob is not None and verifiers.token_fates(rule):
        kept = event.status == "accepted"
        lines.append(f"accept prob min(1, p/q) = {fmt(event.accept_prob)}")
        relation, verdict = ("&lt;", "accepted") if kept else ("&ge;", "rejected")
        u, a = fmt_pair(event.u, event.accept_prob)
        lines.append(f"u = {u} {relation} {a}: {verdict}")
    elif event.accept_prob is not None:
        lines.append(
            f"{event.status} by the {rule} rule (the distribution panel says why); "
            f"token-wise min(1, p/q) = {fmt(event.accept_prob)}, u = {fmt(event.u)}"
        )
        if index in kept_beyond_token_stop(rnd):
            lines.append(
                f"accepted beyond the token-wise stop (dotted): with the same draws the "
                f"token-wise rule would have stopped at position {token_wise_stop(rnd) + 1}"
            )
    if event.status in DRAFTED:  # what the round's extras say of a draft (core.trace.extras)
        notes = (extra.token_note(rnd, index, fmt) for extra in rnd.extras.values())
        lines.extend(_html(note) for note in notes if note)
    if event.status == "discarded":
        lines.append("drafted after the first rejection: never judged")
    if event.status == "resampled":
        lines.append(f"drawn from norm(max(0, p - q)) with probability {fmt(event.residual)}")
    if event.status == "bonus":
        lines.append("all drafts accepted: drawn from p at the next position")
    lines.append("<i>click to inspect this position</i>")
    return "<br>".join(f"<nobr>{line}</nobr>" for line in lines)


STOPS = {
    "k": "drafted K",
    "eos": "drafted end-of-text",
    "threshold": "below the confidence threshold",
    "no_match": "nothing (more) matched",
    "limit": "at the length limit",
}


def round_k(rnd: Round) -> int | None:
    """The K the policy chose for the round (a 1.0 trace: its settings' K)."""
    if rnd.k is not None:
        return rnd.k
    return None if rnd.settings is None else rnd.settings.k


def k_text(rnd: Round) -> str:
    """K of the round, why drafting stopped and where a lookup copied from (plain text)."""
    k = round_k(rnd)
    parts = [] if k is None else [f"K {k}"]
    if rnd.stop and rnd.tree is not None and rnd.stop == "k":  # a tree has levels, not K
        parents = rnd.tree.parent
        levels = tree_levels(parents)
        parts.append(f"stopped: drafted a tree of {len(parents)} nodes, {levels} levels")
    elif rnd.stop:
        parts.append(f"stopped: {STOPS.get(rnd.stop, rnd.stop)}")
    notes = (extra.round_note(rnd) for extra in rnd.extras.values())  # core.trace.extras
    parts.extend(note for note in notes if note)
    return " \u00b7 ".join(parts)


def matched_span(rnd: Round) -> tuple[int, int] | None:
    """[start, end): the context tokens a proposal copied from or (suffix) matched, as its
    extras say (the registry's last that has one)."""
    spans = [extra.context_span(rnd) for extra in rnd.extras.values()]
    return next((span for span in reversed(spans) if span is not None), None)


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


BLOCK_CHARS = 1200  # a paragraph longer than this ends at the next round boundary


class TokenView(QTextEdit):
    """A read-only stream of tokens coloured by fate (colours from `palette`).

    position_selected(round_index, position) is emitted on click (GUI thread).
    """

    position_selected = Signal(int, int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setReadOnly(True)
        self.setUndoRedoEnabled(False)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setMouseTracking(True)
        self._base_point = max(QFont(self.font()).pointSizeF(), 10.0) * 1.25
        self.set_scale(1.0)
        self.document().setDocumentMargin(10)
        self._formats = {status: _format_for(f) for status, f in palette.FATES.items()}
        # An accepted draft the token-wise rule would have rejected (a block round's gain):
        # accepted, dotted beneath in the rejected colour.
        self._beyond = QTextCharFormat(self._formats["accepted"])
        self._beyond.setUnderlineStyle(QTextCharFormat.UnderlineStyle.DotLine)
        self._beyond.setUnderlineColor(QColor(palette.fate("rejected").foreground))
        self._boundary = QTextCharFormat()
        self._boundary.setForeground(QColor(palette.BOUNDARY))
        self._boundary.setFontWeight(QFont.Weight.Bold)
        self.clear_session(None)

    # ------------------------------------------------------------------------------ model

    def set_scale(self, factor: float) -> None:
        """The stream's text size: its base size (a quarter above the window's) x factor."""
        font = QFont(self.font())
        font.setPointSizeF(self._base_point * factor)
        self.document().setDefaultFont(font)

    def clear_session(self, header: SessionHeader | None) -> None:
        """Start over: show the prompt of `header` (nothing if None)."""
        self.clear()
        self.setExtraSelections([])
        self._rounds: list[Round] = []
        self._starts: list[int] = []  # document position of each span, increasing
        self._ends: list[int] = []
        self._keys: list[tuple[int, int]] = []  # (round index, token index) of each span
        self._spans: dict[tuple[int, int], tuple[int, int]] = {}
        # document span of each context position (prompt tokens, then emitted tokens); None
        # where a prompt token's text is not found in the prompt (a special token)
        self._context: list[tuple[int, int] | None] = []
        self.selected: tuple[int, int] | None = None
        self.copied_span: tuple[int, int] | None = None  # [start, end) drawn as copied from
        if header is not None:
            prompt = QTextCharFormat()
            prompt.setForeground(QColor(palette.PROMPT))
            prompt.setBackground(QColor(palette.PROMPT_BACKGROUND))
            cursor = self._end_cursor()
            cursor.insertText(header.prompt.replace("\n", "\u21b5\n"), prompt)
            self._context = prompt_spans(header)

    def _end_cursor(self) -> QTextCursor:
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        return cursor

    def append_rounds(self, rounds: Sequence[Round]) -> None:
        """Add rounds at the end in one edit: Qt lays the document out once per edit, so a
        replay that draws a thousand rounds at a time costs one layout, not a thousand."""
        if not rounds:
            return
        bar = self.verticalScrollBar()
        follow = bar.value() >= bar.maximum() - 4
        before = len(self._rounds)
        cursor = self._end_cursor()
        cursor.beginEditBlock()
        # Neighbouring tokens of one fate (a run of accepted drafts) go in with one
        # insertText; each token's span is counted, not asked of the cursor.
        position, block = cursor.position(), cursor.block().length()
        run: list[str] = []
        run_format = None
        starts, ends, keys, spans = self._starts, self._ends, self._keys, self._spans
        pieces = []
        rounds_by_index = {rnd.index: rnd for rnd in rounds}
        for rnd in rounds:
            pieces.append(((rnd.index, ROUND_TOKEN), BOUNDARY_MARK, self._boundary))
            beyond = kept_beyond_token_stop(rnd)
            pieces.extend(
                (
                    (rnd.index, i),
                    display_text(t.text),
                    self._beyond if i in beyond else self._formats[t.status],
                )
                for i, t in enumerate(rnd.tokens)
            )
        for key, text, text_format in pieces:
            if key[1] == ROUND_TOKEN and block > BLOCK_CHARS:
                # Qt lays out a whole paragraph on every edit: long sessions without
                # newlines would cost O(session) per round. A new paragraph at a round
                # boundary keeps each append local (benchmarks/gui_redraw.py).
                if run:
                    cursor.insertText("".join(run), run_format)
                    run.clear()
                cursor.insertBlock()
                position, block = position + 1, 0
            elif text_format is not run_format and run:
                cursor.insertText("".join(run), run_format)
                run.clear()
            run_format = text_format
            run.append(text)
            end = position + qt_length(text)
            starts.append(position)
            ends.append(end)
            keys.append(key)
            spans[key] = (position, end)
            if key[1] != ROUND_TOKEN and rounds_by_index[key[0]].tokens[key[1]].emitted:
                self._context.append((position, end))
            line_break = text.rfind("\n")
            block = block + end - position if line_break < 0 else len(text) - line_break
            position = end
        if run:
            cursor.insertText("".join(run), run_format)
        cursor.endEditBlock()
        if cursor.position() != position:
            raise RuntimeError(f"token spans out of step: {position} != {cursor.position()}")
        self._rounds.extend(rounds)
        if self.selected is not None and self.selected[0] == before - 1:
            # a selection that ended at the document's end grew with the new text
            self.select(*self.selected, scroll=False)
        if follow:
            bar.setValue(bar.maximum())

    @property
    def round_count(self) -> int:
        return len(self._rounds)

    def round(self, index: int) -> Round:
        return self._rounds[index]

    # ------------------------------------------------------------------------------ queries

    def span(self, round_index: int, token_index: int) -> tuple[int, int]:
        """Document positions [start, end) of a token (token_index -1: the round's mark)."""
        return self._spans[(round_index, token_index)]

    def span_text(self, round_index: int, token_index: int) -> str:
        start, end = self.span(round_index, token_index)
        cursor = QTextCursor(self.document())
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        return cursor.selectedText().replace("\u2029", "\n")

    def char_format(self, round_index: int, token_index: int) -> QTextCharFormat:
        """The format the token was drawn with (for tests and the legend)."""
        start, _ = self.span(round_index, token_index)
        cursor = QTextCursor(self.document())
        cursor.setPosition(start + 1)
        return cursor.charFormat()

    def key_at(self, doc_pos: int) -> tuple[int, int] | None:
        """(round index, token index) of the character at a document position."""
        i = bisect.bisect_right(self._starts, doc_pos) - 1
        if i < 0 or doc_pos >= self._ends[i]:
            return None
        return self._keys[i]

    def key_at_point(self, point: QPoint) -> tuple[int, int] | None:
        """The token under a point of the viewport."""
        cursor = self.cursorForPosition(point)
        pos = cursor.position()
        rect = self.cursorRect(cursor)
        if point.x() < rect.x() or rect.y() > point.y() + 2:
            pos -= 1  # the point is on the character before the nearest boundary
        return self.key_at(pos)

    def tooltip_at(self, key: tuple[int, int]) -> str:
        rnd = self._rounds[key[0]]
        if key[1] == ROUND_TOKEN:
            k = k_text(rnd)
            return _html(
                f"round {rnd.index + 1}: drafted {rnd.n_drafted}, accepted {rnd.n_accepted}, "
                f"emitted {rnd.n_emitted} ({rnd.ms:.1f} ms)" + (f"; {k}" if k else "")
            )
        return token_tooltip(rnd, key[1])

    # ------------------------------------------------------------------------------ selection

    def select(self, round_index: int, position: int, scroll: bool = True) -> None:
        """Highlight every token at a position of a round (drafted and emitted)."""
        if not 0 <= round_index < len(self._rounds):
            return
        rnd = self._rounds[round_index]
        selections = []
        beyond = kept_beyond_token_stop(rnd)
        for i in tokens_at(rnd, position):
            start, end = self._spans[(round_index, i)]
            sel = QTextEdit.ExtraSelection()
            sel.cursor = QTextCursor(self.document())
            sel.cursor.setPosition(start)
            sel.cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
            highlight = QTextCharFormat()
            highlight.setBackground(QColor(palette.SELECTED))
            line = QTextCharFormat.UnderlineStyle.SingleUnderline
            colour = QColor(palette.fate(rnd.tokens[i].status).foreground)
            if i in beyond:  # a dotted mark stays dotted when selected
                line, colour = self._beyond.underlineStyle(), self._beyond.underlineColor()
            highlight.setUnderlineStyle(line)
            highlight.setUnderlineColor(colour)
            sel.format = highlight
            selections.append(sel)
        selections.extend(self._copied_selections(rnd))
        self.setExtraSelections(selections)
        self.selected = (round_index, position)
        if scroll and selections:
            start = selections[0].cursor.selectionStart()
            rect = self.cursorRect(_cursor_at(self.document(), start))
            if not self.viewport().rect().contains(rect):
                bar = self.verticalScrollBar()
                bar.setValue(bar.value() + rect.center().y() - self.viewport().height() // 2)

    def _copied_selections(self, rnd: Round) -> list:
        """The context tokens a prompt-lookup proposal of `rnd` was copied from (or a suffix
        proposal matched), in blue; `copied_span` is their extent in the document."""
        self.copied_span = None
        start, end = matched_span(rnd) or (0, 0)
        spans = [s for s in self._context[max(start, 0) : max(end, 0)] if s is not None]
        if not spans:
            return []
        self.copied_span = (spans[0][0], spans[-1][1])
        copied = QTextCharFormat()
        copied.setBackground(QColor(palette.COPIED))
        copied.setUnderlineStyle(QTextCharFormat.UnderlineStyle.SingleUnderline)
        copied.setUnderlineColor(QColor(palette.COPIED_LINE))
        selections = []
        for start, end in spans:  # each copied context token (not the drafts in between)
            sel = QTextEdit.ExtraSelection()
            sel.cursor = QTextCursor(self.document())
            sel.cursor.setPosition(start)
            sel.cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
            sel.format = copied
            selections.append(sel)
        return selections

    # ------------------------------------------------------------------------------ events

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            key = self.key_at_point(event.pos())
            if key is None:
                QToolTip.hideText()
            else:
                QToolTip.showText(event.globalPos(), self.tooltip_at(key), self.viewport())
            return True
        return super().viewportEvent(event)

    def mouseReleaseEvent(self, event) -> None:
        super().mouseReleaseEvent(event)
        if event.button() != Qt.MouseButton.LeftButton or self.textCursor().hasSelection():
            return
        key = self.key_at_point(event.position().toPoint())
        if key is not None:
            self.click(*key)

    def click(self, round_index: int, token_index: int) -> None:
        """What a click on a token does: select its position and say so."""
        rnd = self._rounds[round_index]
        position = 0 if token_index == ROUND_TOKEN else position_of(rnd, token_index)
        self.select(round_index, position, scroll=False)
        self.position_selected.emit(round_index, position)


def prompt_spans(header: SessionHeader) -> list[tuple[int, int] | None]:
    """Document span of each prompt token, from the header's token texts found in turn in
    the prompt as displayed; None for a token whose text is not there (BOS, a special token)."""
    texts = header.prompt_text
    if len(texts) != len(header.prompt_ids):
        return [None] * len(header.prompt_ids)
    prompt, offset, doc, spans = header.prompt, 0, 0, []
    for text in texts:
        if text and prompt.startswith(text, offset):
            shown = qt_length(text.replace("\n", "\u21b5\n"))
            spans.append((doc, doc + shown))
            offset, doc = offset + len(text), doc + shown
        else:
            spans.append(None)
    return spans


def _cursor_at(document, pos: int) -> QTextCursor:
    cursor = QTextCursor(document)
    cursor.setPosition(pos)
    return cursor


def _format_for(f: palette.Fate) -> QTextCharFormat:
    out = QTextCharFormat()
    out.setForeground(QColor(f.foreground))
    out.setBackground(QColor(f.background))
    out.setFontStrikeOut(f.struck)
    out.setProperty(QTextFormat.Property.UserProperty, f.label)
    return out


def status_of(f: QTextCharFormat) -> str | None:
    """The fate a format was made for (tests, and the legend's check)."""
    value = f.property(QTextFormat.Property.UserProperty)
    return value if isinstance(value, str) else None
