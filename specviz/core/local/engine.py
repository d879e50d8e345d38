"""The Engine seam (core.engine.protocol) on a pair loaded in this process."""

from __future__ import annotations

from collections.abc import Iterator

from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.trace.records import Round, SessionHeader, Settings
from specviz.core.tune.sweep import run_sweep


class LocalEngine:
    """A SpeculativeEngine per session on one loaded pair (core.models.pair.ModelPair).
    Not thread-safe: one owner thread."""

    def __init__(self, pair, drafting: tuple | None = None):
        self.pair = pair
        self.drafting = drafting or (None, None)  # (DrafterConfig, PolicyConfig) by default
        self.engine: SpeculativeEngine | None = None

    def start(
        self,
        prompt: str,
        settings: Settings,
        calibrate: bool = True,
        trace: bool = True,
        chat: bool | None = False,
        drafting: tuple | None = None,
    ) -> SessionHeader:
        import dataclasses

        from specviz.core.models.chat import session_prompt

        prompt, chat_record = session_prompt(self.pair, prompt, chat)  # ValueError: no template
        drafter, policy = drafting or self.drafting
        engine = SpeculativeEngine(self.pair, settings, trace=trace, drafter=drafter, policy=policy)
        header = engine.prefill(prompt, calibrate=calibrate)
        if chat_record is not None:
            header = engine.header = dataclasses.replace(header, chat=chat_record)
        self.engine = engine
        return header

    @property
    def header(self) -> SessionHeader | None:
        return None if self.engine is None else self.engine.header

    @property
    def finished(self) -> bool:
        return self.engine is not None and self.engine.finished

    def _session(self) -> SpeculativeEngine:
        if self.engine is None:
            raise ValueError("no session: start one first")
        return self.engine

    def step(self) -> Round:
        return self._session().step()

    def run(self, max_rounds: int | None = None) -> Iterator[Round]:
        return self._session().run(max_rounds)

    def pause(self) -> list[Round]:
        return []  # rounds are made one at a time here: none is ahead

    def update_settings(self, settings: Settings) -> None:
        self._session().update_settings(settings)

    def continue_session(self, settings: Settings) -> None:
        engine = self._session()
        if engine.finish_reason not in ("max_new_tokens", "eos"):
            why = "it ended at the context length" if engine.finished else "it has not ended"
            raise ValueError(f"cannot continue: {why}")
        engine.update_settings(settings)
        engine.finish_reason = None

    def remeasure(self) -> None:
        self._session().prober.request_full()

    def position(self, context_ids: list[int], settings: Settings, top_n: int = 20):
        from specviz.core.drafters.registry import DrafterConfig, make_drafter
        from specviz.core.lab.position import position_distributions

        if self.engine is not None:
            drafter = self.engine.drafter
        else:
            drafter = make_drafter(self.drafting[0] or DrafterConfig(), self.pair)
        return position_distributions(self.pair, context_ids, settings, top_n, drafter)

    def greedy_check(self, prompt_ids: list[int], emitted: list[int]):
        from specviz.core.decoding.greedy_check import check_greedy

        return check_greedy(self.pair, list(prompt_ids), list(emitted))

    def sweep(self, prompts, config, cancel=None, on_run=None, trace_dir=None):
        """core.tune.sweep.run_sweep over this engine's pair (its own engines, a run each)."""
        return run_sweep(self.pair, prompts, config, cancel, on_run, trace_dir)

    def close(self) -> None:
        self.engine = None
