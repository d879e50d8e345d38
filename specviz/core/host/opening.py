"""Opening a session on a loaded pair: the engine built (core.engine.speculative), the prompt
read (as a chat turn where asked, core.models.chat) and prefilled. The one place specviz
makes a session: the session host's start (the window, `run`, `serve`), tune's sweeps and
curves and bench's runs all come here."""

from __future__ import annotations

import dataclasses

from specviz.core.engine.cost_probes import Prober
from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.models.chat import session_prompt
from specviz.core.trace.records import Settings


def open_session(
    pair,
    prompt: str,
    settings: Settings,
    drafting: tuple | None = None,
    *,
    calibrate: bool = True,
    trace: bool = True,
    chat: bool | None = False,
    prompt_ids: list[int] | None = None,
    prober: Prober | None = None,
    probing: bool | None = None,
    watch_greedy: bool = True,
    before_build=None,
) -> SpeculativeEngine:
    """A prefilled session (its `header` set; `run()` and `step()` give its rounds).

    drafting: (DrafterConfig or None, PolicyConfig or None), None for the defaults; chat:
    the prompt as a user turn of the target's chat template (None: so for an instruct
    target; ValueError where the target has no template); prompt_ids: the prompt's tokens as
    given (a later turn, the earlier turns' own tokens kept); prober: the cost-model probes'
    plan (tune's); probing: the probes on or off after the prefill (None: as calibrate left
    them); watch_greedy: a half-precision greedy session watches for a flip (bench, which
    times sessions whole, turns it off); before_build: called once the prompt is read and
    before the engine is built (the host drops its old session there, freeing its caches)."""
    text, chat_record = session_prompt(pair, prompt, chat)  # ValueError: no template
    if before_build is not None:
        before_build()
    drafter, policy = drafting or (None, None)
    engine = SpeculativeEngine(
        pair,
        settings,
        trace=trace,
        drafter=drafter,
        policy=policy,
        prober=prober,
        watch_greedy=watch_greedy,
    )
    header = engine.prefill(text, prompt_ids, calibrate=calibrate)
    if chat_record is not None:
        engine.header = dataclasses.replace(header, chat=chat_record)
    if probing is not None:
        engine.probing = probing
    return engine
