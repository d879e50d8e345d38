"""A session: its header and the rounds so far, in order."""

from __future__ import annotations

from dataclasses import dataclass, field

from .trace import Round, SessionHeader


@dataclass
class Session:
    """Header plus rounds. Owned by one thread (the GUI's, or a headless run's)."""

    header: SessionHeader
    rounds: list[Round] = field(default_factory=list)
    # Lines of the file it was read from that could not be used (a cut-off last line).
    warnings: list[str] = field(default_factory=list)

    @property
    def session_id(self) -> str:
        return self.header.session_id

    def append(self, rnd: Round) -> bool:
        """Add a round; a round of another (reset) session or out of order is dropped."""
        if rnd.session_id != self.session_id or rnd.index != len(self.rounds):
            return False
        self.rounds.append(rnd)
        return True

    @property
    def emitted_ids(self) -> list[int]:
        return [t.id for r in self.rounds for t in r.tokens if t.emitted]

    def context_ids(self, round_index: int, position: int) -> list[int]:
        """The token ids that the models had read before position `position` of a round
        (0-based among its drafted positions): prompt, earlier emitted tokens, and the
        drafts of that round before the position."""
        ids = list(self.header.prompt_ids)
        for rnd in self.rounds[:round_index]:
            ids.extend(t.id for t in rnd.tokens if t.emitted)
        drafted = [
            t.id
            for t in self.rounds[round_index].tokens
            if t.status in ("accepted", "rejected", "discarded")
        ]
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
