"""Greedy against the target alone: a greedy speculative session must emit exactly the
target's own greedy decoding. This runs that decoding and names the first difference."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specviz.core.decoding.forward import decode
from specviz.core.decoding.warp import SamplingConfig
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
