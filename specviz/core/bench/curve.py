"""specviz's own acceptance curve on a pair, for `specviz doctor --pair ... --prompts F` to
set beside an engine's: each prompt a session on tune's engine path (core.tune.sweep
run_session, no probes), the rounds folded into the engines' counters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from specviz.core.decoding.forward import measure_ms_per_token
from specviz.core.drafters.registry import DrafterConfig, make_drafter
from specviz.core.metrics.engine_metrics import EngineRecord
from specviz.core.tune.promptsets import Prompt
from specviz.core.tune.sweep import SweepConfig, run_session


def measured_curve(
    pair, prompts: Sequence[Prompt], k: int, config: SweepConfig, cancel=None
) -> EngineRecord:
    """The rounds of every prompt at K as vLLM would count them: drafts (rounds that
    drafted), draft tokens, accepted tokens and accepted per position (a round whose
    drafts 1..i were kept counts at each of them)."""
    drafts = drafted = accepted = 0
    per_pos = [0] * k
    config = replace(config, ks=(k,))
    for prompt in prompts:
        _, rounds = run_session(pair, prompt.text, k, config, cancel, probe=False)
        for rnd in rounds:
            if rnd.n_drafted == 0:  # the last token of a session: the target's own
                continue
            drafts += 1
            drafted += rnd.n_drafted
            accepted += rnd.n_accepted
            for i in range(min(rnd.n_accepted, k)):
                per_pos[i] += 1
        if cancel is not None and cancel.is_set():
            break
    return EngineRecord("specviz", "measured", drafts, drafted, accepted, tuple(per_pos), k=k,
                        intervals=len(prompts))  # fmt: skip


def measured_cost_ratio(pair, prompt: Prompt, drafter: DrafterConfig | None = None) -> float:
    """c = a draft step's median time / a target step's, after the prompt (16 steps each)."""
    ids = list(pair.tokenizer(prompt.text)["input_ids"])
    target_ms = measure_ms_per_token(pair.target, ids, 16, pair.vocab_size)
    draft_ms = make_drafter(drafter or DrafterConfig(), pair).measure_ms(ids, 16)
    return draft_ms / target_ms
