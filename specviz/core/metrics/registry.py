"""The figures specviz folds from round records: one `MetricSpec` each, a table without torch.

Adding a metric: a module in core/metrics/ with its fold (an object with `add(rnd)` and
`value()`, a JSON value: a number, a list of numbers, or None) and one entry in `SPECS`
below. `inspect` (its report's "metrics", a line each), the window's running stats
(RunningStats.metrics, listed in the status bar's acceptance tooltip) and tune's table (each
row's "metrics") read SPECS, each over its own rounds: the session's, or one K's runs.
A spec's fold is made when its folding starts (MetricFolds), so a metric registered later
(a test's) is read from then on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from specviz.core.metrics.positions import PositionCounts
from specviz.core.trace.records import Round


class Fold(Protocol):
    """A figure folded over rounds, a round at a time (O(1) memory in the rounds)."""

    def add(self, rnd: Round) -> None: ...

    def value(self) -> Any: ...


@dataclass(frozen=True)
class MetricSpec:
    """A figure as the rest of specviz sees it."""

    name: str  # the key in `inspect --json`'s "metrics" and in a tune row's
    label: str  # what `inspect` and the window call it
    help: str  # one line: what it counts
    fold: Callable[[], Fold]  # a new, empty fold

    def over(self, rounds: Iterable[Round]) -> Any:
        """The figure over these rounds."""
        fold = self.fold()
        for rnd in rounds:
            fold.add(rnd)
        return fold.value()


class _Ratio:
    """sum(part) / sum(whole) over the rounds (None while the whole is 0)."""

    def __init__(self, part: Callable[[Round], float], whole: Callable[[Round], float]):
        self.part, self.whole = part, whole
        self.num = self.den = 0.0

    def add(self, rnd: Round) -> None:
        self.num += self.part(rnd)
        self.den += self.whole(rnd)

    def value(self) -> float | None:
        return self.num / self.den if self.den else None


class _Positions(PositionCounts):
    """PositionCounts as a Fold: its value is `by_position` or, whole, `acceptance`."""

    def __init__(self, whole: bool):
        super().__init__()
        self.whole = whole

    def value(self) -> Any:
        return self.acceptance if self.whole else self.by_position


def _drafted(rnd: Round) -> int:
    """A round's drafted tokens (a tree's: its nodes)."""
    return len(rnd.tree.parent) if rnd.tree is not None else rnd.n_drafted


SPECS: dict[str, MetricSpec] = {
    s.name: s
    for s in (
        MetricSpec(
            "acceptance",
            "acceptance",
            "accepted / judged drafts (a tree's: the nodes the rule tried)",
            lambda: _Positions(whole=True),
        ),
        MetricSpec(
            "acceptance_by_position",
            "acceptance by position",
            "accepted / judged drafts at each drafted position 1..K (a tree's: each depth)",
            lambda: _Positions(whole=False),
        ),
        MetricSpec(
            "draft_efficiency",
            "draft efficiency",
            "accepted / all drafted tokens, discarded ones included (a tree's: its nodes)",
            lambda: _Ratio(lambda r: r.n_accepted, _drafted),
        ),
        MetricSpec(
            "tokens_per_pass",
            "tokens per target pass",
            "emitted tokens per round (one target pass each)",
            lambda: _Ratio(lambda r: r.n_emitted, lambda r: 1),
        ),
    )
}


class MetricFolds:
    """Every metric of SPECS (as it is when made) folded over the same rounds."""

    def __init__(self, specs: Mapping[str, MetricSpec] | None = None):
        self.specs = tuple((SPECS if specs is None else specs).values())
        self.folds = [spec.fold() for spec in self.specs]

    def add(self, rnd: Round) -> None:
        for fold in self.folds:
            fold.add(rnd)

    def values(self) -> dict[str, Any]:
        """{name: value} in SPECS' order."""
        return {spec.name: fold.value() for spec, fold in zip(self.specs, self.folds, strict=True)}

    def lines(self) -> list[str]:
        """Each metric as `inspect` and the window show it: "label: value"."""
        values = self.values()
        return [f"{spec.label}: {value_text(values[spec.name])}" for spec in self.specs]


def metrics_over(rounds: Iterable[Round]) -> dict[str, Any]:
    """Every metric of SPECS over these rounds: {name: value}."""
    folds = MetricFolds()
    for rnd in rounds:
        folds.add(rnd)
    return folds.values()


def value_text(value: Any) -> str:
    """A metric's value in words: a number to 3 decimals, a list as "1: 0.812  2: ...",
    None as n/a."""
    if value is None:
        return "n/a"
    if isinstance(value, list | tuple):
        return "  ".join(f"{i}: {value_text(v)}" for i, v in enumerate(value, start=1)) or "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)
