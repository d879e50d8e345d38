"""The trace records (SessionHeader, Round, TokenEvent, Settings, ModelInfo), the format's
vocabulary (statuses, which numbers each status carries, field lists), schema
"specviz.trace/1.9". Their JSON form is specviz.core.trace.serialize.

A trace is one JSON object per line: the session header, one line per round, and an
optional summary. Records are plain frozen values: they cross from the worker thread to the
GUI. The session that holds them is specviz.core.trace.session; files are specviz.core.trace.files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from specviz.core.trace import verifiers

E = TypeVar("E")

SCHEMA = "specviz.trace/1.10"
SCHEMA_MAJOR = 1
SCHEMA_MINOR = 10  # each minor version added optional fields only, so an older file reads
# as a newer one without them: 1.1 k, stop, events_ms, probes, copied_from, drafter, policy,
# eos_token_id; 1.2 the UNJUDGED numbers below; 1.3 a probe's t1_ms and rule_ms, and the
# summary's speedup interval and status (core.metrics.speedup), settings.verifier and a
# round's block numbers; 1.4 the lossy verifier "typical", its settings and a round's
# typical numbers; 1.5 token trees: the tree settings and a round's tree; 1.6 the header's
# chat and dtype_choice, a round's greedy_diff and `matched` (suffix decoding); 1.7 the
# verifier "tree" for a tree's rounds (1.5 and 1.6 wrote "token" there, read as "tree");
# 1.8 a round's draft_pieces (a draft with another tokenizer); 1.9 a judged tree token's
# p_tried and q_tried (TRIED below); 1.10 the lossy verifier "lenient" and a round's
# lenient numbers (each extra says its minor: core.trace.extras, `since`)
# Why a round's drafting stopped: it reached the policy's K, drafted an end-of-text token,
# the draft was unsure (threshold policy), a lookup found no match, or a length limit.
STOP_REASONS = ("k", "eos", "threshold", "no_match", "limit")
# Why the session ended, on its last round: an end-of-text token was emitted, max_new_tokens
# were emitted, or the models' context length was reached.
FINISH_REASONS = ("eos", "max_new_tokens", "context_length")

# A token's status, in the order they occur in a round (README.md, Token objects).
STATUSES = ("accepted", "rejected", "discarded", "resampled", "bonus")
JUDGED = ("accepted", "rejected")  # drafts the target judged: the acceptance rate's denominator
DRAFTED = ("accepted", "rejected", "discarded")  # every drafted token
EMITTED = ("accepted", "resampled", "bonus")  # the generated text
ENDINGS = ("resampled", "bonus")  # the round's own token, after a rejection / after all kept
# Which numbers a token of each status carries: present on it, absent on the other statuses
# (README.md, Token objects). p_rest and q_rest go with `top`, where p and q exist.
NUMBERS_BY_STATUS = {
    "accepted": ("p", "q", "accept_prob", "u", "alpha"),
    "rejected": ("p", "q", "accept_prob", "u", "alpha"),
    "discarded": ("q",),
    "resampled": ("p", "q", "alpha", "residual"),
    "bonus": ("p",),
}
# Schema 1.2, optional, on discarded tokens only: what the target computed at a position it
# never judged. Its one pass scores all K + 1 positions, so at a draft after the round's
# first rejection p exists, but no accept test ran on it. The numbers have names of their
# own, not p / p_rest / top's p column (which stay absent / null there, as in 1.1), so a
# 1.1 reader, which ignores unknown token fields, reads a 1.2 trace and still finds it valid.
UNJUDGED = ("unjudged_p", "unjudged_p_rest", "unjudged_top_p")
# Schema 1.9, on a tree round's judged tokens only: the p its test used (p_tried, on every
# one: a later sibling's is p after its earlier siblings' rejections) and, under the rule
# "topk", q_tried = 1 (chosen without randomness): accept_prob = min(1, p_tried/q_tried).
# p and q stay the target's and the draft's own p(x) and q(x), as on every other token.
TRIED = ("p_tried", "q_tried")


class TraceError(ValueError):
    """A trace that cannot be read; the message names the line (1-based) and the field."""

    def __init__(self, message: str, line: int | None = None, field_name: str | None = None):
        where = f"line {line}: " if line is not None else ""
        what = f"field '{field_name}': " if field_name else ""
        super().__init__(f"{where}{what}{message}")
        self.reason = message
        self.line = line
        self.field_name = field_name


@dataclass(frozen=True)
class ModelInfo:
    """Which model was used and how it was loaded."""

    name: str  # what the user asked for: "builtin:tiny", a hub id or a folder
    path: str  # the local folder it was loaded from, or the hub id
    vocab_size: int
    params: int
    dtype: str
    device: str


def cost_ratio(target_ms: float | None, draft_ms: float | None) -> float | None:
    """c: one draft step over one target step; None when either was not measured."""
    if not target_ms or draft_ms is None:
        return None
    return draft_ms / target_ms


MIN_TEMPERATURE = 1e-4  # below it, 0 (greedy) is what is meant: logits / T would overflow


def check_sampling(temperature: float, top_k: int, top_p: float) -> None:
    """Raise ValueError for sampling settings no warp can use."""
    if not 0 <= temperature < float("inf"):
        raise ValueError(f"temperature must be >= 0 and finite (0 = greedy), got {temperature}")
    if 0 < temperature < MIN_TEMPERATURE:
        # logits / T overflows float32 far above this (1e-38 gave inf, then NaN)
        raise ValueError(
            f"temperature must be 0 (greedy) or at least {MIN_TEMPERATURE}, got {temperature}"
        )
    if top_k < 0:
        raise ValueError(f"top-k must be >= 0 (0 = off), got {top_k}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top-p must be in (0, 1], got {top_p}")


MAX_K = 32  # drafted tokens per round, at most
# The verification rules (settings.verifier) are core.trace.verifiers' table.
# Schema 1.5, token trees (core.tree.walk): written when tree_width > 1 only.
TREE_SETTINGS = ("tree_width", "tree_budget", "tree_draw", "tree_shape")
TREE_DRAWS = ("sample", "topk")  # W i.i.d. draws from q (SpecInfer), or q's top W (EAGLE)
TREE_SHAPES = ("full", "dynamic")  # every node W children, or the likeliest (EAGLE-2)
MAX_TREE_WIDTH = 8  # children per node, at most
MAX_TREE_BUDGET = 64  # drafted nodes in one round's tree, at most
TREE_FATES = ("accepted", "rejected", "discarded")  # a node's: kept, tried and not, untried
MAX_TOP_N = 1000  # tokens kept per position in a trace, at most


@dataclass(frozen=True)
class Settings:
    """What the user chose for a session; K and sampling may change between rounds."""

    k: int = 4  # drafted tokens per round
    temperature: float = 1.0  # 0 = greedy
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1.0 = off
    seed: int = 0
    max_new_tokens: int = 64
    top_n: int = 20  # tokens kept per position in the trace, for the bars of a replay
    ignore_eos: bool = False  # end-of-text does not end the session (long explorations)
    # Schema 1.3: how the drafts are judged, a rule of core.trace.verifiers: "token"
    # (Leviathan et al., one at a time) or "block" (Sun et al., the drafts as a block); both
    # lossless. Schema 1.4: or "typical" (Medusa's typical acceptance, LOSSY), keeping x
    # while p(x) > min(typical_epsilon, typical_delta * exp(-H(p))) (core.decoding.typical).
    # Schema 1.7: "tree" (the multi-draft rule) for a tree; "token" there, as 1.5 and 1.6
    # wrote it and as the chain default, reads as "tree" (__post_init__).
    verifier: str = "token"
    typical_epsilon: float = 0.3
    typical_delta: float = 0.09
    # Schema 1.5: a token tree instead of a chain when tree_width > 1: each drafted node
    # gets up to tree_width children (drawn from q, or q's top ones: tree_draw), to depth K,
    # at most tree_budget nodes in all; "dynamic" expands the likeliest nodes only.
    tree_width: int = 1
    tree_budget: int = 16
    tree_draw: str = "sample"
    tree_shape: str = "full"

    def __post_init__(self) -> None:
        if self.verifier == "token" and type(self.tree_width) is int and self.tree_width > 1:
            object.__setattr__(self, "verifier", "tree")

    @property
    def tree(self) -> bool:
        """The rounds draft a token tree (tree_width > 1), not a chain."""
        return self.tree_width > 1

    @property
    def lossy(self) -> bool:
        """The verifier does not reproduce the target's distribution."""
        rule = verifiers.SPECS.get(self.verifier)
        return rule is not None and not rule.lossless

    def validate(self) -> None:
        """Raise ValueError with a message a user can act on."""
        if not 1 <= self.k <= MAX_K:
            raise ValueError(f"K must be between 1 and 32, got {self.k}")
        check_sampling(self.temperature, self.top_k, self.top_p)
        if self.max_new_tokens < 1:
            raise ValueError(f"max new tokens must be >= 1, got {self.max_new_tokens}")
        if not 1 <= self.top_n <= MAX_TOP_N:
            raise ValueError(f"top-N must be between 1 and {MAX_TOP_N}, got {self.top_n}")
        verifiers.spec(self.verifier)  # ValueError: unknown verifier 'x' (one of ...)
        for name in ("typical_epsilon", "typical_delta"):
            value = getattr(self, name)
            if not 0 < value <= 1:  # NaN fails too
                raise ValueError(f"{name.replace('_', ' ')} must be in (0, 1], got {value}")
        self._validate_tree()

    def _validate_tree(self) -> None:
        if type(self.tree_width) is not int or not 1 <= self.tree_width <= MAX_TREE_WIDTH:
            raise ValueError(
                f"the tree width must be between 1 (a chain) and {MAX_TREE_WIDTH}, "
                f"got {self.tree_width}"
            )
        if type(self.tree_budget) is not int or not 1 <= self.tree_budget <= MAX_TREE_BUDGET:
            raise ValueError(
                f"the tree budget must be between 1 and {MAX_TREE_BUDGET} nodes, "
                f"got {self.tree_budget}"
            )
        if self.tree_draw not in TREE_DRAWS:
            raise ValueError(
                f"unknown tree draw {self.tree_draw!r} (one of {', '.join(TREE_DRAWS)})"
            )
        if self.tree_shape not in TREE_SHAPES:
            raise ValueError(
                f"unknown tree shape {self.tree_shape!r} (one of {', '.join(TREE_SHAPES)})"
            )
        rule = verifiers.spec(self.verifier)
        if rule.trees != self.tree:
            trees = ", ".join(verifiers.names(trees=self.tree))
            raise ValueError(
                f"a token tree is verified by a tree rule; --verifier {self.verifier} judges "
                f"chains only (use --tree-width 1, or --verifier {trees})"
                if self.tree
                else f"--verifier {self.verifier} judges token trees: give a --tree-width "
                f"above 1, or a chain rule ({', '.join(verifiers.names(trees=False))})"
            )


@dataclass(frozen=True, init=False)
class TokenEvent:
    """One token of a round and its fate.

    Probabilities are at this token's position, after temperature / top-k / top-p. Which
    of them a token carries depends on its status: NUMBERS_BY_STATUS.
    """

    id: int
    text: str
    status: str  # one of STATUSES
    p: float | None = None  # target probability of this token (None: discarded, see below)
    q: float | None = None  # draft probability of this token (None: bonus)
    accept_prob: float | None = None  # min(1, p/q), judged tokens only
    u: float | None = None  # the uniform draw compared with accept_prob
    alpha: float | None = None  # sum_x min(p(x), q(x)) at this position
    residual: float | None = None  # probability under norm(max(0, p - q)) (resampled)
    p_rest: float | None = None  # target mass outside `top`
    q_rest: float | None = None  # draft mass outside `top`
    # Schema 1.2, discarded tokens only (UNJUDGED): the target's p of this token and its mass
    # outside `top`, from the round's target pass; never judged (no accept test ran here).
    unjudged_p: float | None = None
    unjudged_p_rest: float | None = None
    # Schema 1.9, a tree round's judged tokens only (TRIED): what accept_prob was taken from.
    p_tried: float | None = None
    q_tried: float | None = None
    # The top-N tokens by max(p, q) at this position: (id, p, q); q is None at a bonus
    # position and p is None at a discarded one.
    top: tuple[tuple[int, float | None, float | None], ...] = ()
    # Texts of the ids in top / residual_top, so a replay can label bars without a tokenizer.
    top_text: tuple[str, ...] = ()
    # For a resampled token: the top-N of the normalised residual it was drawn from.
    residual_top: tuple[tuple[int, float], ...] = ()
    residual_text: tuple[str, ...] = ()  # texts of the ids in residual_top
    # Schema 1.2, discarded tokens only: the target's p of each entry of `top`, in its order
    # (`top` itself keeps p null there).
    unjudged_top_p: tuple[float, ...] = ()

    def __init__(
        self,
        id: int,
        text: str,
        status: str,
        p: float | None = None,
        q: float | None = None,
        accept_prob: float | None = None,
        u: float | None = None,
        alpha: float | None = None,
        residual: float | None = None,
        p_rest: float | None = None,
        q_rest: float | None = None,
        unjudged_p: float | None = None,
        unjudged_p_rest: float | None = None,
        p_tried: float | None = None,
        q_tried: float | None = None,
        top: tuple = (),
        top_text: tuple[str, ...] = (),
        residual_top: tuple = (),
        residual_text: tuple[str, ...] = (),
        unjudged_top_p: tuple[float, ...] = (),
    ) -> None:
        # The fields in one step: a frozen dataclass's generated __init__ sets them one at a
        # time through object.__setattr__, half the cost of reading a token from a trace
        # (half a million in a 100k-round trace). test_trace_records checks the signature.
        object.__setattr__(
            self,
            "__dict__",
            {
                "id": id, "text": text, "status": status, "p": p, "q": q,
                "accept_prob": accept_prob, "u": u, "alpha": alpha, "residual": residual,
                "p_rest": p_rest, "q_rest": q_rest, "unjudged_p": unjudged_p,
                "unjudged_p_rest": unjudged_p_rest, "p_tried": p_tried, "q_tried": q_tried,
                "top": top, "top_text": top_text,
                "residual_top": residual_top, "residual_text": residual_text,
                "unjudged_top_p": unjudged_top_p,
            },
        )  # fmt: skip

    @property
    def emitted(self) -> bool:
        return self.status in EMITTED


class Extras(Mapping[str, Any]):
    """A round's extras by key (core.trace.extras), in the line's order: read-only and
    hashable, as the frozen round that holds them."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._items = dict(items or {})

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self):
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __repr__(self) -> str:
        return f"Extras({self._items!r})"


NO_EXTRAS = Extras()


class _ExtraByKey:
    """`round.NAME`: the round's extra whose key is NAME (typed, core.trace.extras), or None."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = name

    def __get__(self, rnd: Round | None, owner: type | None = None) -> Any:
        return self if rnd is None else rnd.extras.get(self.key)


@dataclass(frozen=True)
class Round:
    """One draft-and-verify round: K drafted tokens, their verdicts, one target token."""

    session_id: str
    index: int  # 0-based round number within the session
    context_len: int  # tokens (prompt + emitted) before the round
    draft_ms: float  # wall time of the K draft forward passes
    verify_ms: float  # wall time of the target pass and the verification
    n_drafted: int
    n_accepted: int
    tokens: tuple[TokenEvent, ...]
    settings: Settings | None = None  # the settings this round ran with
    finish_reason: str | None = None  # one of FINISH_REASONS on the session's last round
    # Schema 1.1, optional. The K the policy chose (n_drafted may be fewer) and why drafting
    # stopped (one of STOP_REASONS).
    k: int | None = None
    stop: str | None = None
    events_ms: float | None = None  # building the token records (top-N lists): not verify_ms
    # What the round records beyond its tokens, by key, each a typed extra of
    # core.trace.extras (its registry lists them: the cost-model probes, prompt lookup's
    # copied_from, a block or typical round's numbers, a token tree, greedy_diff, suffix
    # decoding's match, a bridged draft's pieces); absent where the round records none.
    extras: Extras = NO_EXTRAS

    def extra(self, cls: type[E]) -> E | None:
        """The round's extra of type cls (a core.trace.extras class), or None."""
        return self.extras.get(cls.key)

    # The extras of today's rules and drafters by key, typed (core.trace.extras.registry
    # lists their classes; records, below them, names none): extras.probes.Probes,
    # copied.CopiedFrom, block.BlockNumbers, typical.TypicalThresholds, tree.TokenTree,
    # greedy_diff.GreedyDiff, matched.SuffixMatch, pieces.DraftPieces.
    probes = _ExtraByKey()
    copied_from = _ExtraByKey()
    block = _ExtraByKey()
    typical = _ExtraByKey()
    tree = _ExtraByKey()
    greedy_diff = _ExtraByKey()
    matched = _ExtraByKey()
    draft_pieces = _ExtraByKey()

    @property
    def emitted(self) -> tuple[TokenEvent, ...]:
        return tuple(t for t in self.tokens if t.emitted)

    @property
    def n_emitted(self) -> int:
        return sum(1 for t in self.tokens if t.emitted)

    @property
    def n_judged(self) -> int:
        return sum(1 for t in self.tokens if t.status in JUDGED)

    @property
    def ms(self) -> float:
        return self.draft_ms + self.verify_ms


@dataclass(frozen=True)
class SessionHeader:
    """Everything about a session that is fixed when it starts."""

    session_id: str
    prompt: str
    prompt_ids: tuple[int, ...]
    target: ModelInfo
    draft: ModelInfo
    settings: Settings
    created: str  # ISO 8601
    specviz: str  # version that wrote it
    baseline_ms_per_token: float | None  # target-only decode time per token, measured
    draft_ms_per_token: float | None  # draft-only decode time per token, measured
    prompt_text: tuple[str, ...] = ()  # the text of each prompt token
    # Schema 1.1, optional: how tokens were drafted ({"kind": "model" | "lookup" |
    # "early-exit", ...parameters}) and how K was chosen ({"kind": "constant" | "heuristic" |
    # "threshold", ...}). None in a 1.0 trace: a model drafter and a constant K.
    drafter: dict[str, Any] | None = None
    policy: dict[str, Any] | None = None
    # Schema 1.1, optional: the tokenizer's end-of-text id, which ends a session (finish_reason
    # "eos") unless it ignores end-of-text. None: not recorded (a 1.0 trace) or no such token.
    eos_token_id: int | None = None
    # Schema 1.6, optional: the prompt as a user turn of the chat template ({"user": the text
    # typed, "why": ...}; `prompt` is then the rendered turn), and how the dtype was chosen
    # ({"dtype", "why", "k", "probe_ms": {dtype: {n: ms}}, "cached"}: core.models.dtype_probe).
    chat: dict[str, Any] | None = None
    dtype_choice: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # unknown fields, kept for writing

    @property
    def typed_prompt(self) -> str:
        """The text the user gave: a chat turn's user text, else the prompt itself."""
        user = (self.chat or {}).get("user")
        return user if isinstance(user, str) else self.prompt

    @property
    def cost_ratio(self) -> float | None:
        """c: one draft step over one target step."""
        return cost_ratio(self.baseline_ms_per_token, self.draft_ms_per_token)


# ---------------------------------------------------------------- field lists, derived once


def drafter_notes(header: SessionHeader) -> list[str]:
    """The drafter's warnings the header keeps (extra "drafter_notes": strings, at most 8 of
    at most 1000 characters from a file); [] when there are none."""
    notes = header.extra.get("drafter_notes")
    if not isinstance(notes, list):
        return []
    return [n[:1000] for n in notes if isinstance(n, str)][:8]


# What a trace line holds is what the records hold: the writer and the reader take their
# field lists from the dataclasses below, never from lists of their own.


def _optional(cls: type) -> tuple[str, ...]:
    """Fields with a default of None: left out of a line when None (schema 1.1's additions,
    a round's settings and finish_reason, a token's numbers)."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.default is None)


HEADER_FIELDS = tuple(f.name for f in dataclasses.fields(SessionHeader) if f.name != "extra")
HEADER_OPTIONAL = _optional(SessionHeader)  # drafter, policy, eos_token_id, chat, dtype_choice
HEADER_KEYS = frozenset(("type", "schema", *HEADER_FIELDS))  # any other key is kept in extra
ROUND_FIELDS = tuple(
    f.name for f in dataclasses.fields(Round) if f.name not in ("session_id", "extras")
)
ROUND_OPTIONAL = _optional(Round)  # settings, finish_reason, k, stop, events_ms
# Schema 1.1's fields a round may leave out, given by name to make_round with its extras.
ROUND_SCALARS = frozenset(ROUND_OPTIONAL) - {"settings", "finish_reason"}


# A token's numbers (p, q, accept_prob, u, alpha, residual, p_rest, q_rest, unjudged_p,
# unjudged_p_rest, p_tried, q_tried) and its lists (top, top_text, residual_top,
# residual_text, unjudged_top_p).
EVENT_NUMBERS = _optional(TokenEvent)
EVENT_LISTS = tuple(f.name for f in dataclasses.fields(TokenEvent) if f.default == ())
# The numbers that are probabilities (u is a uniform draw in [0, 1), checked as such).
PROBABILITIES = tuple(name for name in EVENT_NUMBERS if name != "u")
