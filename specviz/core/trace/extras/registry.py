"""The round extras, one line each: what the trace reader (core.trace.parse), the writer
(core.trace.serialize), the checks (core.trace.check_session) and make_round loop over.

Adding an extra: its module here (a frozen dataclass on base.Extra: key, since, from_json,
from_value, to_json, check) and its line in EXTRAS. A round line writes its extras after
the fields every round has, in this order (a new one goes last, so older lines keep their
bytes); Round.extras holds them by key, Round.extra(cls) reads one typed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from specviz.core.trace.extras.base import Extra, Found
from specviz.core.trace.extras.block import BlockNumbers
from specviz.core.trace.extras.copied import CopiedFrom
from specviz.core.trace.extras.greedy_diff import GreedyDiff
from specviz.core.trace.extras.lenient import LenientNumbers
from specviz.core.trace.extras.matched import SuffixMatch
from specviz.core.trace.extras.pieces import DraftPieces
from specviz.core.trace.extras.probes import Probes
from specviz.core.trace.extras.tree import TokenTree
from specviz.core.trace.extras.typical import TypicalThresholds

if TYPE_CHECKING:
    from specviz.core.trace.records import Round, SessionHeader, Settings

EXTRAS: tuple[type[Extra], ...] = (
    Probes,  # 1.1 the cost model's probes (core.engine.cost_probes)
    CopiedFrom,  # 1.1 prompt lookup's span (core.drafters.lookup)
    BlockNumbers,  # 1.3 block verification (core.decoding.block)
    TypicalThresholds,  # 1.4 typical acceptance, lossy (core.decoding.typical)
    TokenTree,  # 1.5 a token tree's nodes (core.tree)
    GreedyDiff,  # 1.6 where greedy half precision leaves the target alone
    SuffixMatch,  # 1.6 suffix decoding's match (core.drafters.suffix)
    DraftPieces,  # 1.8 a bridged draft's own cut (core.drafters.bridge.recut)
    LenientNumbers,  # 1.10 lenient speculative sampling, lossy for l < 1 (core.decoding.lenient)
)
BY_KEY: dict[str, type[Extra]] = {cls.key: cls for cls in EXTRAS}


def as_extra(key: str, value: Any) -> Extra | None:
    """The typed extra `key` of `value`: itself when typed already, else read from the
    engine's form (Extra.from_value); None stays None. KeyError for a key not registered."""
    cls = BY_KEY[key]
    if value is None or isinstance(value, cls):
        return value
    return cls.from_value(value)


def ordered(extras: Mapping[str, Extra | None]) -> dict[str, Extra]:
    """The extras present, in the registry's (the line's) order."""
    return {key: extras[key] for key in BY_KEY if extras.get(key) is not None}


def extras_json(extras: Mapping[str, Extra]) -> Iterator[tuple[str, Any]]:
    """(key, JSON value) of each extra a round holds, in the line's order."""
    for key in BY_KEY:
        extra = extras.get(key)
        if extra is not None:
            yield key, extra.to_json()


def check_extras(rnd: Round, settings: Settings, header: SessionHeader) -> Found:
    """Each extra's checks of its round, in the registry's order (an extra missing where
    its rule calls for one included)."""
    for cls in EXTRAS:
        yield from cls.check(rnd, settings, header)
