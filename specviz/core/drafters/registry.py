"""The drafters specviz knows, and the config that names one.

Adding a drafter: a module beside this one with its Drafter subclass and a
`build(params, pair)`, and its spec (core.drafters.spec.DrafterSpec) in `SPECS` below: the
specs load without torch, and a drafter's module is imported when one is made. Everything
that offers or checks a drafter (the command line, the Drafting box, the wire format, the
trace header's reading) asks this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specviz.core.drafters.spec import DrafterParam, DrafterSpec, built_by

if TYPE_CHECKING:
    from specviz.core.drafters.base import Drafter


def _early_exit_words(params) -> str:
    layers = "half" if params["exit_layer"] is None else str(params["exit_layer"])
    return f"the target's first {layers} layers (no draft model)"


def _suffix_words(params) -> str:
    cache = params["suffix_cache"]
    held = f"and up to {cache} earlier outputs" if cache else "only (no cache)"
    return f"suffix decoding over this request {held} (no draft model)"


# Each drafter's module is imported when one is built (built_by), not here.
SPECS: dict[str, DrafterSpec] = {
    spec.kind: spec
    for spec in (
        DrafterSpec(
            kind="model",
            label="the draft model",
            tip="A second, smaller model drafts (the classic pair)",
            help="the draft model (default)",
            needs_draft_model=True,
            params=(),
            build=built_by("specviz.core.drafters.draft_model"),
            words=lambda params: "the draft model",
            drafts_trees=True,
        ),
        DrafterSpec(
            kind="lookup",
            label="prompt lookup (n-grams, no model)",
            tip="Copy what followed the last n tokens where they appeared before in the "
            "prompt or the text so far (transformers' prompt_lookup_num_tokens). No draft "
            "model is loaded; q is one-hot, so a copied token is kept with probability p",
            help="'lookup': n-grams copied from the prompt and text so far, no draft model "
            "(transformers' prompt_lookup_num_tokens)",
            needs_draft_model=False,
            params=(
                DrafterParam(
                    "ngram_max",
                    "N-gram max",
                    "lookup: longest n-gram matched (transformers' max_matching_ngram_size)",
                    default=2,
                    low=1,
                    high=64,
                ),
            ),
            build=built_by("specviz.core.drafters.prompt_lookup"),
            words=lambda params: (
                f"prompt lookup, n-grams up to {params['ngram_max']} (no draft model)"
            ),
            no_match="the last tokens matched no earlier n-gram: there was nothing to copy",
        ),
        DrafterSpec(
            kind="early-exit",
            label="early exit (the target's first layers)",
            tip="The target's first L layers, its final norm and head draft "
            "(transformers' assistant_early_exit). No draft model is loaded",
            help="'early-exit': the target's own first layers (transformers' assistant_early_exit)",
            needs_draft_model=False,
            params=(
                DrafterParam(
                    "exit_layer",
                    "Exit layer",
                    "early-exit: how many target layers draft (assistant_early_exit; default half)",
                    default=None,
                    low=1,
                    high=1000,
                    none_label="half",
                ),
            ),
            build=built_by("specviz.core.drafters.early_exit"),
            words=_early_exit_words,
        ),
        DrafterSpec(
            kind="suffix",
            label="suffix decoding (no model)",
            tip="Match the longest suffix of the text in this request and in earlier requests' "
            "outputs, and draft what most often followed it (vLLM's method 'suffix'). No draft "
            "model is loaded; q is one-hot, so a drafted token is kept with probability p",
            help="'suffix': suffix decoding over this request and a cache of earlier outputs, no "
            "draft model (vLLM's method 'suffix', Arctic Inference)",
            needs_draft_model=False,
            params=(
                DrafterParam(
                    "suffix_depth",
                    "Suffix depth",
                    "suffix: longest suffix matched (vLLM's suffix_decoding_max_tree_depth)",
                    default=24,
                    low=1,
                    high=64,
                ),
                DrafterParam(
                    "suffix_spec_factor",
                    "Suffix spec factor",
                    "suffix: tokens drafted per "
                    "matched token, at most (vLLM's suffix_decoding_max_spec_factor)",
                    default=1.0,
                    low=0,
                    high=16,
                    decimals=2,
                ),
                DrafterParam(
                    "suffix_min_prob",
                    "Suffix min prob",
                    "suffix: a drafted path's least probability "
                    "(vLLM's suffix_decoding_min_token_prob)",
                    default=0.1,
                    low=0,
                    high=1,
                    decimals=2,
                ),
                DrafterParam(
                    "suffix_cache",
                    "Suffix cache",
                    "suffix: earlier requests' outputs kept, "
                    "in a file in the cache folder; 0: this request only (vLLM's "
                    "suffix_decoding_max_cached_requests)",
                    default=10000,
                    low=0,
                    high=100_000,
                ),
            ),  # fmt: skip
            build=built_by("specviz.core.drafters.suffix"),
            words=_suffix_words,
            drafts_trees=True,
            no_match="no earlier text (this request or a cached output) continued the last "
            "tokens with a likely enough token: there was nothing to draft",
        ),
        DrafterSpec(
            kind="eagle3",
            label="an EAGLE-3 head",
            tip="A one-layer head on the target's own hidden states drafts "
            "(EAGLE-3, speculators format)",
            help="eagle3: an EAGLE-3 head on the target's hidden states (--head DIR|HF_ID; the "
            "built-in pairs have their own)",
            needs_draft_model=False,
            params=(
                DrafterParam(
                    name="head",
                    label="EAGLE-3 head",
                    help="eagle3: the head, a folder in the speculators format or a hub id "
                    "(default: the built-in pair's own head)",
                    default=None,
                    none_label="the pair's own",
                    text=True,
                ),
            ),
            build=built_by("specviz.core.drafters.eagle3.drafter"),
            words=lambda params: f"the EAGLE-3 head {params.get('head') or '(the pair’s own)'}",
            drafts_trees=True,
        ),
        DrafterSpec(
            kind="tli",
            label="a draft with another tokenizer",
            tip="A draft model whose tokenizer differs drafts the tokens both vocabularies share "
            "(TLI, lossless at any temperature)",
            help="tli: a draft model with another tokenizer, restricted to the tokens both "
            "vocabularies share (--vocab-bridge tli)",
            needs_draft_model=True,
            params=(),
            build=built_by("specviz.core.drafters.bridge.tli"),
            words=lambda params: "the draft model, on the tokens both vocabularies share",
        ),
        DrafterSpec(
            kind="string",
            label="a draft with another tokenizer, by its text",
            tip="A draft model whose tokenizer differs drafts greedily; its text, re-cut by the "
            "target's tokenizer, is the proposal (one-hot q: lossless at any temperature)",
            help="string: a draft model with another tokenizer, its greedy text re-tokenized for "
            "the target (--vocab-bridge string)",
            needs_draft_model=True,
            params=(),
            build=built_by("specviz.core.drafters.bridge.string_draft"),
            words=lambda params: "the draft model's greedy text, re-cut by the target's tokenizer",
        ),
    )
}


def spec(kind: str) -> DrafterSpec:
    """The spec of a drafter kind; ValueError naming the known ones."""
    try:
        return SPECS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"unknown drafter {kind!r} (one of {', '.join(SPECS)})") from None


def all_params() -> tuple[DrafterParam, ...]:
    """Every drafter's parameters, each name once, in registry order (the flags, the box)."""
    seen: dict[str, DrafterParam] = {}
    for s in SPECS.values():
        for p in s.params:
            seen.setdefault(p.name, p)
    return tuple(seen.values())


@dataclass(frozen=True, init=False)
class DrafterConfig:
    """Which drafter, and the parameters given for it (a parameter left out takes its
    spec's default). A plain value: equal and hashable by content, safe across threads."""

    kind: str
    params: tuple[tuple[str, Any], ...]  # (name, value), sorted by name; None values dropped

    def __init__(self, kind: str = "model", **params: Any):
        object.__setattr__(self, "kind", kind)
        given = tuple(sorted((k, v) for k, v in params.items() if v is not None))
        object.__setattr__(self, "params", given)

    @property
    def spec(self) -> DrafterSpec:
        return spec(self.kind)

    @property
    def needs_draft_model(self) -> bool:
        return self.spec.needs_draft_model

    def values(self) -> dict[str, Any]:
        """Every parameter of this drafter, given or default."""
        given = dict(self.params)
        return {p.name: given.get(p.name, p.default) for p in self.spec.params}

    def param(self, name: str) -> Any:
        """One parameter's value, given or default; KeyError if this drafter has none so."""
        return self.values()[name]

    def validate(self) -> None:
        """ValueError for an unknown kind, a parameter it does not take or a bad value."""
        s = self.spec
        known = {p.name for p in s.params}
        extra = sorted(set(dict(self.params)) - known)
        if extra:
            raise ValueError(f"the {s.kind} drafter takes no {', '.join(extra)}")
        for p in s.params:
            p.check(self.values()[p.name])

    def to_json(self) -> dict[str, Any]:
        """The wire format's (and a Drafting box's) form: kind and every parameter."""
        return {"kind": self.kind, **self.values()}

    @classmethod
    def from_json(cls, obj: Any, lenient: bool = False) -> DrafterConfig:
        """From {"kind": ..., parameters...}: ValueError for anything else. lenient (a trace
        header being shown): unknown keys and bad values fall back to the defaults."""
        if type(obj) is not dict:
            raise ValueError("a drafter must be an object with a kind")
        kind = obj.get("kind", "model")
        if lenient and kind not in SPECS:
            return cls()
        s = spec(kind)
        names = {p.name for p in all_params()}
        if not lenient and not set(obj) - {"kind"} <= names:
            bad = sorted(set(obj) - {"kind"} - names)
            raise ValueError(f"unknown drafter fields: {', '.join(bad)}")
        params = {}
        for p in s.params:
            value = obj.get(p.name, p.default)
            try:
                p.check(value)
            except ValueError:
                if not lenient:
                    raise
                value = p.default
            params[p.name] = value
        return cls(kind, **params)


def make_drafter(config: DrafterConfig, pair) -> Drafter:
    """The drafter `config` names, on a loaded pair (core.models.pair.ModelPair); ValueError
    if it cannot be built (no draft model for "model", an unsupported layout for
    "early-exit")."""
    config.validate()
    return config.spec.build(config.values(), pair)


def check_tree_kind(kind: str) -> None:
    """ValueError unless drafters of this kind draft token trees (DrafterSpec.drafts_trees):
    what the engine, the command line and the Drafting box refuse a tree with."""
    if not spec(kind).drafts_trees:
        trees = ", ".join(s.kind for s in SPECS.values() if s.drafts_trees)
        raise ValueError(
            f"a token tree is drafted by the {trees} drafters; the {kind} drafter drafts "
            "chains only (use one of those, or --tree-width 1)"
        )
