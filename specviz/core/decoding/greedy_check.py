"""Greedy against the target alone: a greedy speculative session must emit exactly the
target's own greedy decoding. check_greedy runs that decoding and names the first difference;
GreedyWatch does it as a session runs in half precision, where a pass of K+1 tokens rounds
differently from a pass of 1 and a near-tie can flip (a Round's greedy_diff)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from specviz.core.decoding.forward import decode, forward
from specviz.core.decoding.warp import SamplingConfig
from specviz.core.models.kept import PerModel
from specviz.core.models.pair import ModelPair


@dataclass(frozen=True)
class GreedyDiff:
    """The first position where the session and the target's greedy decoding differ, with
    the target's logits (one fresh single-row pass over the common prefix) for both tokens:
    a near tie is the usual cause (batched versus single-row numerics)."""

    position: int  # 0-based among the generated tokens
    ours: int  # the session's token
    theirs: int  # the target's greedy token
    logit_ours: float
    logit_theirs: float
    text_ours: str
    text_theirs: str


@torch.inference_mode()
def check_greedy(pair: ModelPair, prompt_ids: list[int], emitted: list[int]) -> GreedyDiff | None:
    """None when the target's greedy decoding of the prompt gives `emitted` (as far as it
    goes); else the first difference."""
    if not emitted:
        return None
    reference = decode(
        pair.target,
        list(prompt_ids),
        len(emitted),
        pair.vocab_size,
        SamplingConfig(temperature=0),
        eos_token_id=pair.eos_token_id,
    )
    for i, ours in enumerate(emitted):
        theirs = reference[i] if i < len(reference) else None
        if ours == theirs:
            continue
        ids = torch.tensor([list(prompt_ids) + list(emitted[:i])], device=pair.device)
        logits = pair.target(input_ids=ids).logits[0, -1, : pair.vocab_size].float()  # [V]
        theirs = int(logits.argmax()) if theirs is None else theirs
        return GreedyDiff(
            position=i,
            ours=ours,
            theirs=theirs,
            logit_ours=float(logits[ours]),
            logit_theirs=float(logits[theirs]),
            text_ours=pair.token_text(ours),
            text_theirs=pair.token_text(theirs),
        )
    return None


# ------------------------------------------------------------------ half precision, watched

HALF = ("bfloat16", "float16")  # dtypes whose passes of 1 and of K+1 tokens round apart
TOP = 20  # the target alone's logits kept per position (the session's token is among them)
_REFERENCES: PerModel[_Reference] = PerModel(4)  # prompts kept, each with its KV cache


@dataclass
class _Reference:
    """The target alone's greedy decoding of one prompt, as far as it went: each token and
    the top logits it was picked from; the cache to go on from."""

    tokens: list[int]
    top: list[tuple[list[int], list[float]]]
    cache: DynamicCache
    ended: bool = False  # it emitted end-of-text


def reference_for(pair: ModelPair, prompt_ids: list[int], eos: int | None) -> _Reference:
    """The cached reference of this target, dtype and prompt (computed once, extended as
    sessions need more of it)."""
    key = (str(pair.target.dtype), tuple(prompt_ids), eos)
    return _REFERENCES.get(pair.target, key, lambda: _Reference([], [], DynamicCache()))


@torch.inference_mode()
def _extend(pair: ModelPair, ref: _Reference, prompt_ids: list[int], n: int, eos) -> None:
    """The reference to at least n tokens (fewer after its end-of-text): decode()'s loop."""
    while len(ref.tokens) < n and not ref.ended:
        fed = list(prompt_ids) if not ref.tokens else [ref.tokens[-1]]
        logits = forward(pair.target, fed, ref.cache, pair.vocab_size, keep=1)[0].float()  # [V]
        top = torch.topk(logits, min(TOP, logits.shape[0]))
        ref.tokens.append(int(logits.argmax()))  # as decode() picks: the first of a tie
        ref.top.append((top.indices.tolist(), top.values.tolist()))
        ref.ended = eos is not None and ref.tokens[-1] == eos


class GreedyWatch:
    """Follows a greedy half-precision session round by round against the target alone's
    greedy decoding (reference_for); names the first generated token where they part, once.
    Runs on the engine's thread, after a round's times were taken."""

    def __init__(self, pair: ModelPair, prompt_ids: list[int], eos: int | None):
        self.pair, self.prompt_ids, self.eos = pair, list(prompt_ids), eos
        self.ref = reference_for(pair, self.prompt_ids, eos)
        self.done = False  # parted already, or the session stopped being greedy

    def check(self, emitted: list[int], start: int, pass_tokens: int) -> dict | None:
        """The round's emitted tokens (generated positions start, start + 1, ...): the
        first difference as a Round.greedy_diff, or None."""
        if self.done or not emitted:
            return None
        _extend(self.pair, self.ref, self.prompt_ids, start + len(emitted), self.eos)
        for i, ours in enumerate(emitted, start):
            if i >= len(self.ref.tokens):
                return None  # the reference ended here (end-of-text): nothing to compare
            theirs = self.ref.tokens[i]
            if ours == theirs:
                continue
            self.done = True
            ids, logits = self.ref.top[i]
            if ours in ids:
                logit_ours = logits[ids.index(ours)]
            else:  # far below the top: one pass over the common prefix for its logit
                context = torch.tensor(
                    [self.prompt_ids + self.ref.tokens[:i]], device=self.pair.device
                )
                logit_ours = float(self.pair.target(input_ids=context).logits[0, -1, ours])
            return {
                "position": i, "ours": ours, "theirs": theirs,
                "text_ours": self.pair.token_text(ours),
                "text_theirs": self.pair.token_text(theirs),
                "logit_ours": float(logit_ours), "logit_theirs": float(logits[0]),
                "pass_tokens": pass_tokens,
            }  # fmt: skip
        return None


def watches(pair: ModelPair, temperature: float) -> bool:
    """Whether a session is watched: greedy, the target in half precision."""
    return temperature == 0 and str(pair.target.dtype).removeprefix("torch.") in HALF
