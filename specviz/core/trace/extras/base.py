"""What a round extra is: one typed, frozen record of something a round records beyond its
tokens (a rule's numbers, a drafter's, a probe's), with its own JSON key.

An extra says
- `key`: its JSON key on a round line (and its name in make_round's extras, Round.extras);
- `since`: the schema version, (major, minor), it appeared in (an older trace has none);
- `json_type`: the JSON type of its value (dict or list), checked by the reader before
  from_json sees it;
- `from_json(value, line)`: the value read strictly; a TraceError names the line and the
  field ("block.h[2]");
- `from_value(value)`: the engine's own form (the dict or tuple it builds) as the record,
  its numbers kept as given, so a same-seed trace stays bit for bit what it was;
- `to_json()`: the value a round line holds (the writer's bytes are what they were);
- `check(rnd, settings, header)`: what it must agree with in its round (a classmethod: it
  also names an extra that is missing where its rule calls for one), as (field, message);
- `read_tokens(tokens)`: the round's tokens as the current schema writes them (a tree's
  1.5-1.8 tokens, core.trace.extras.tree); most extras leave them as read;
- what the window says of it, in plain text, where it has something to say: `round_note`
  (the round's line in the stream), `token_note` (a drafted token's hover) and
  `context_span` (the context tokens the proposal came from, shown in blue). The stream
  loops over a round's extras for these: no branch of its own per extra;
- `position_test(rnd, position, drafted)`: a rule's numbers as the accept test it ran at a
  judged position (PositionTest), what the distribution panel's gauge and text show there.

The registry (core.trace.extras.registry) lists them; the reader, the writer, the checks
and make_round loop over it. Pure Python, no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from typing import Self

    from specviz.core.trace.records import Round, SessionHeader, Settings, TokenEvent

Found = Iterator[tuple[str, str]]  # (field, message) of a check
JUDGED = ("accepted", "rejected")


@dataclass(frozen=True)
class PositionTest:
    """The accept test a rule ran at one judged position: `mark` held against `line`, kept
    above it (`above`: p against a threshold) or below it (a draw u), and the numbers' own
    verdict. The distribution panel draws it as a gauge and reads it out."""

    axis: str  # the test in a few words, under the gauge: "u vs h_i"
    mark: float  # the value held against the line: a draw u, or p
    line: float  # what it is held against: h_i, a threshold, min(1, p/q)
    passes: bool  # the numbers' verdict: mark < line (mark > line when above)
    above: bool  # kept above the line (a threshold on p) rather than below it (a draw)
    mark_name: str = "u"  # "u", "p"
    line_name: str = ""  # "h"; "" for a line named by the axis alone
    why: str = ""  # one sentence on the rule, for the panel's text ("" for none)


class Extra:
    """The base of a round's typed extras (a frozen dataclass each); see the module."""

    key: ClassVar[str]
    since: ClassVar[tuple[int, int]]
    json_type: ClassVar[type] = dict

    @classmethod
    def from_json(cls, value: Any, line: int | None) -> Self:
        raise NotImplementedError

    @classmethod
    def from_value(cls, value: Any) -> Self:
        """The engine's form; by default the JSON form, read strictly."""
        return cls.from_json(value, None)

    def to_json(self) -> Any:
        raise NotImplementedError

    @classmethod
    def check(cls, rnd: Round, settings: Settings, header: SessionHeader) -> Found:
        """Nothing to check beyond its form, by default."""
        return iter(())

    def read_tokens(self, tokens: tuple[TokenEvent, ...]) -> tuple[TokenEvent, ...]:
        return tokens

    def round_note(self, rnd: Round) -> str | None:
        """A few words for the round's line in the stream; None: nothing to say."""
        return None

    def token_note(self, rnd: Round, index: int, fmt: Callable[[float], str]) -> str | None:
        """A line of rnd.tokens[index]'s hover (a drafted token's: accepted, rejected or
        discarded); fmt shows a probability as the window does. None: nothing to say."""
        return None

    def context_span(self, rnd: Round) -> tuple[int, int] | None:
        """[start, end): the context tokens the round's proposal came from; None: none."""
        return None

    def position_test(
        self, rnd: Round, position: int, drafted: TokenEvent | None
    ) -> PositionTest | None:
        """The accept test the round's rule ran at a drafted position, from these numbers
        (drafted: the token drafted there); None where they hold none."""
        return None


def rule_round(
    rnd: Round, settings: Settings, rule: str, numbers: Extra | None, what: str
) -> tuple[list[tuple[str, str]], list[TokenEvent] | None]:
    """The start of a verification rule's extra's check: (the problems found, the judged
    tokens its numbers must match, or None when nothing more is to be checked): a round of
    another rule holds none of its numbers, and a round of the rule that judged tokens holds
    them (`what`: the numbers' name in the message)."""
    if settings.verifier != rule and numbers is None:
        return [], None
    if rnd.settings is not None and rnd.settings.verifier != rule:
        return [(rule, f"{rule} numbers in a round not verified by the {rule} rule")], None
    judged = [t for t in rnd.tokens if t.status in JUDGED]
    if numbers is None:
        return ([(rule, f"a {rule} round without its {what}")] if judged else []), None
    return [], judged
