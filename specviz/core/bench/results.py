"""What a bench is and what it gave, without running anything: its configurations and
settings, each question's runs and the whole result (core.bench.runs runs them, with torch;
core.bench.table and the window's bench view read them, and import no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specviz.core.bench.questions import Question
from specviz.core.drafters.registry import DrafterConfig
from specviz.core.trace.records import Settings

if TYPE_CHECKING:
    from specviz.core.decoding.warp import SamplingConfig

TARGET = "target"  # the target alone's label in the runs


@dataclass(frozen=True)
class BenchConfig:
    """One configuration a bench runs: who drafts, K, and how the drafts are judged."""

    label: str  # as written: "model:4+tree2x16"
    drafter: DrafterConfig
    k: int
    rule: str = "token"  # a chain verifier's name or a tree's label ("tree2x16")


@dataclass(frozen=True)
class BenchSettings:
    """What every run of a bench shares."""

    # Every run's session settings: sampling (greedy by default, as Spec-Bench), new tokens
    # per turn, the seed (each run's, and the run order's shuffle); each configuration's K
    # and rule are its own (bench_settings), the target alone reads the sampling only.
    settings: Settings = Settings(temperature=0.0)
    chat: bool = False  # the turns through the target's chat template (instruct targets)
    chat_why: str = ""  # why they are (core.models.chat: an instruct target, or --chat)
    # Before the first timed run: the first question's first turn, 8 tokens, under the target
    # alone and each configuration, untimed (the first pass of a model pays one-off costs).
    warmup: bool = True

    @property
    def sampling(self) -> SamplingConfig:
        from specviz.core.decoding.warp import SamplingConfig  # torch: only where runs are

        s = self.settings
        return SamplingConfig(s.temperature, s.top_k, s.top_p)


@dataclass(frozen=True)
class RoundFigures:
    """What the table needs of a round."""

    emitted: int
    accepted: int  # the accepted drafts (a tree's: the accepted path's length)
    drafted: int  # drafted positions (a tree's: its depth)
    judged: int  # drafts the rule judged (core.metrics.positions: a tree's tried nodes)


@dataclass(frozen=True)
class TurnRun:
    tokens: tuple[int, ...]  # the emitted tokens
    seconds: float  # wall time, prefill included
    rounds: tuple[RoundFigures, ...] = ()  # empty for the target alone


@dataclass(frozen=True)
class QuestionRun:
    """One question under one configuration (or the target alone), every turn."""

    question: int  # index in the question list
    category: str
    config: str  # BenchConfig.label or TARGET
    turns: tuple[TurnRun, ...]

    @property
    def tokens(self) -> int:
        return sum(len(t.tokens) for t in self.turns)

    @property
    def seconds(self) -> float:
        return sum(t.seconds for t in self.turns)

    @property
    def rounds(self) -> tuple[RoundFigures, ...]:
        return tuple(r for t in self.turns for r in t.rounds)


@dataclass(frozen=True)
class Difference:
    """Where a configuration's greedy text first leaves the target alone's."""

    turn: int  # 0-based
    position: int  # 0-based among that turn's emitted tokens


def first_difference(ours: QuestionRun, target: QuestionRun) -> Difference | None:
    """None when every turn emitted the target alone's tokens (as far as the shorter goes:
    a length limit cuts both alike); else the first token that differs."""
    for t, (a, b) in enumerate(zip(ours.turns, target.turns, strict=False)):
        for i, (x, y) in enumerate(zip(a.tokens, b.tokens, strict=False)):
            if x != y:
                return Difference(t, i)
        if len(a.tokens) != len(b.tokens):  # one stopped (end of text) where the other did not
            return Difference(t, min(len(a.tokens), len(b.tokens)))
    return None


@dataclass
class BenchResult:
    runs: list[QuestionRun] = field(default_factory=list)
    configs: tuple[BenchConfig, ...] = ()
    questions: tuple[Question, ...] = ()
    settings: BenchSettings = field(default_factory=BenchSettings)
    cancelled: bool = False
