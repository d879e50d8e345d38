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

    @property
    def text(self) -> str:
        """Prompt followed by the generated text, from the stored token texts."""
        return self.header.prompt + "".join(
            t.text for r in self.rounds for t in r.tokens if t.emitted
        )

    @property
    def finished(self) -> bool:
        return bool(self.rounds) and self.rounds[-1].finish_reason is not None
