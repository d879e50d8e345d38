"""A session: its header and the rounds so far, in order, and for a session read from a
file, the lines its rounds came from (their top-N lists, parsed on demand)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specviz.core.trace.records import DRAFTED, Round, SessionHeader

if TYPE_CHECKING:
    from specviz.core.trace.round_lines import RoundLines


@dataclass
class Session:
    """Header plus rounds. Owned by one thread (the GUI's, or a headless run's)."""

    header: SessionHeader
    rounds: list[Round] = field(default_factory=list)
    # Lines of the file it was read from that could not be used (a cut-off last line).
    warnings: list[str] = field(default_factory=list)
    # A session read from a file: each round's line number, and the line itself where its
    # top-N lists were left unparsed (a round's records then hold none: see details()).
    lines: RoundLines | None = field(default=None, compare=False, repr=False)

    @property
    def session_id(self) -> str:
        return self.header.session_id

    def append(self, rnd: Round) -> bool:
        """Add a round; a round of another (reset) session or out of order is dropped."""
        if rnd.session_id != self.session_id or rnd.index != len(self.rounds):
            return False
        self.rounds.append(rnd)
        return True

    def details(self, index: int) -> Round:
        """Round `index` with every field of its tokens, top-N lists included.

        A round read from a file was loaded without its top-N lists (four fifths of a trace,
        needed only to draw one position's bars): its line is parsed again here (about a
        millisecond; nothing is cached), which raises TraceError if the lists are malformed.
        Any other round is returned as it is."""
        rnd = self.rounds[index]
        return rnd if self.lines is None else self.lines.details(rnd)

    def line_number(self, index: int) -> int:
        """The file line of round `index`: where it was read, else where specviz writes it
        (the header is line 1, round i is line i + 2)."""
        number = None if self.lines is None else self.lines.number(index)
        return index + 2 if number is None else number

    def rewound(self) -> Session:
        """This session before its first round: the same header and lines, no rounds (a
        replay adds the rounds back one by one, and exports them as they were read)."""
        return Session(self.header, lines=self.lines)

    def context_ids(self, round_index: int, position: int) -> list[int]:
        """The token ids that the models had read before position `position` of a round
        (0-based among its drafted positions): prompt, earlier emitted tokens, and the
        drafts of that round before the position."""
        ids = list(self.header.prompt_ids)
        for rnd in self.rounds[:round_index]:
            ids.extend(t.id for t in rnd.tokens if t.emitted)
        drafted = [t.id for t in self.rounds[round_index].tokens if t.status in DRAFTED]
        return ids + drafted[:position]

    @property
    def text(self) -> str:
        """Prompt followed by the generated text, from the stored token texts."""
        return self.header.prompt + "".join(
            t.text for r in self.rounds for t in r.tokens if t.emitted
        )

    @property
    def finished(self) -> bool:
        return bool(self.rounds) and self.rounds[-1].finish_reason is not None
