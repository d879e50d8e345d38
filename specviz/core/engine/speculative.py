"""SpeculativeEngine: prefill once, then step() one draft-and-verify round at a time.

A round is one skeleton for chains and trees (core.engine.round_step.run_round): the policy
picks K, the drafter proposes (draft), the target scores the proposal in one pass and the
rule judges it (verify), the emitted tokens are appended and the caches rolled back; then
the token records are built, timed apart (events_ms). Cache invariant between rounds:
`ids` holds prompt + emitted tokens; the target's cache covers ids[:-1] (the last token is
fed at the start of the next verification); a drafter's cache, if it has its own, covers a
prefix of ids[:-1]. On rejection the caches are cropped back to the accepted prefix;
nothing is recomputed.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime, timezone

import torch
from transformers import DynamicCache

from specviz import __version__
from specviz.core.decoding.forward import forward_states, max_positions, measure_ms_per_token
from specviz.core.decoding.greedy_check import GreedyWatch, watches
from specviz.core.decoding.k_policy import Policy, PolicyConfig
from specviz.core.decoding.warp import SamplingConfig
from specviz.core.drafters.registry import DrafterConfig, check_tree_kind, make_drafter
from specviz.core.engine.clock import PhaseClock, on_cuda
from specviz.core.engine.cost_probes import Prober
from specviz.core.engine.round_step import run_round
from specviz.core.models.pair import ModelPair
from specviz.core.trace.records import Round, SessionHeader, Settings


class SpeculativeEngine:
    """The exact speculative sampling loop on a loaded pair. Not thread-safe: one owner.

    trace=True records, per position, the top-N of p and q and their texts (what a replay
    needs); trace=False records only each token's own figures, for speed. drafter: what
    proposes the tokens (default: the pair's draft model); policy: how K is chosen each
    round (default: Settings.k every round). watch_greedy: in a greedy half-precision
    session, follow the target alone's greedy decoding round by round and name where the
    text leaves it (core.decoding.greedy_check.GreedyWatch: one more target pass per
    emitted token, outside the rounds' times but not outside the session's wall time; off
    where the text is compared some other way, as tune and bench do). ValueError when the
    drafter cannot run here.
    """

    def __init__(
        self,
        pair: ModelPair,
        settings: Settings,
        trace: bool = True,
        calibration_tokens: int = 16,
        drafter: DrafterConfig | None = None,
        policy: PolicyConfig | None = None,
        prober: Prober | None = None,
        watch_greedy: bool = True,
    ):
        settings.validate()
        self.pair = pair
        self.settings = settings
        self.trace = trace
        self.calibration_tokens = calibration_tokens
        self.drafter = make_drafter(drafter or DrafterConfig(), pair)
        if settings.tree:
            check_tree_kind(self.drafter.kind)  # its spec says whether it drafts trees
        self.policy = Policy(policy or PolicyConfig(), settings.k)
        self.header: SessionHeader | None = None
        self.finish_reason: str | None = None
        limits = [m for m in (max_positions(pair.target), self.drafter.max_positions) if m]
        self.max_len = min(limits) if limits else None
        self._texts: dict[int, str] = {}
        # Cost-model probes between rounds (core/engine/cost_probes.py), in sessions that calibrate.
        self.prober = prober or Prober()
        self.probing = False
        self.greedy_watch = None  # set by prefill for a greedy half-precision session
        self.watch_greedy = watch_greedy

    # ------------------------------------------------------------------------------ setup

    def tokenize(self, prompt: str) -> list[int]:
        if not prompt or not prompt.strip():
            raise ValueError("the prompt is empty: type some text to continue")
        ids = self.pair.tokenizer(prompt)["input_ids"]
        if not ids:
            raise ValueError("the prompt gives no tokens")
        return list(ids)

    def text(self, token_id: int) -> str:
        text = self._texts.get(token_id)
        if text is None:
            text = self._texts[token_id] = self.pair.token_text(token_id)
        return text

    @torch.inference_mode()
    def prefill(
        self, prompt: str, prompt_ids: list[int] | None = None, calibrate: bool = True
    ) -> SessionHeader:
        """Start a session: encode the prompt, fill both caches, measure the step costs."""
        ids = list(prompt_ids) if prompt_ids is not None else self.tokenize(prompt)
        if not ids:
            raise ValueError("the prompt gives no tokens")
        if self.max_len is not None and len(ids) >= self.max_len:
            raise ValueError(
                f"the prompt is {len(ids)} tokens long; these models read at most {self.max_len}"
            )
        baseline_ms = draft_ms = None
        n = self.calibration_tokens
        if self.max_len is not None:  # 2 warm-up steps and n timed ones past the prompt
            n = min(n, self.max_len - len(ids) - 3)
        if calibrate and n >= 1:
            baseline_ms = measure_ms_per_token(self.pair.target, ids, n, self.pair.vocab_size)
            draft_ms = self.drafter.measure_ms(ids, n)
        self.ids = ids
        self.n_prompt = len(ids)
        self.t_cache = DynamicCache()
        if len(ids) > 1:  # the caches cover ids[:-1]; the last token is fed next round
            layers = self.drafter.target_layers
            _, states = forward_states(
                self.pair.target, ids[:-1], self.t_cache, self.pair.vocab_size, 1, layers
            )
            if states is not None:
                self.drafter.accept_states(states)
        self.drafter.prefill(ids, self.t_cache)
        self.policy.reset(self.settings.k)
        self.generator = torch.Generator(device=self.pair.device)
        self.generator.manual_seed(self.settings.seed)
        self.finish_reason = None
        self.greedy_watch = None  # core.decoding.greedy_check: greedy in half precision
        if self.watch_greedy and watches(self.pair, self.settings.temperature):
            eos = None if self.settings.ignore_eos else self.pair.eos_token_id
            self.greedy_watch = GreedyWatch(self.pair, ids, eos)
        self.round_index = 0
        self.probing = calibrate
        self.header = SessionHeader(
            session_id=uuid.uuid4().hex[:12],
            prompt=prompt,
            prompt_ids=tuple(ids),
            prompt_text=tuple(self.text(i) for i in ids),
            target=self.pair.target_info,
            draft=self.drafter.info,
            settings=self.settings,
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            specviz=__version__,
            baseline_ms_per_token=baseline_ms,
            draft_ms_per_token=draft_ms,
            drafter=self.drafter.describe(),
            policy=self.policy.config.to_json(),
            eos_token_id=self.pair.eos_token_id,
            dtype_choice=getattr(self.pair, "dtype_choice", None),
            extra={"drafter_notes": list(self.drafter.notes)} if self.drafter.notes else {},
        )
        return self.header

    def update_settings(self, settings: Settings) -> None:
        """K, sampling and max tokens apply from the next round; the seed from the next
        session (the generator is already running)."""
        settings.validate()
        if settings.tree:
            check_tree_kind(self.drafter.kind)  # its spec says whether it drafts trees
        if settings.k != self.settings.k:
            self.policy.reset(settings.k)
        if settings.temperature != 0 and self.greedy_watch is not None:
            self.greedy_watch.done = True  # sampled from here on: no one text to compare with
        self.settings = dataclasses.replace(settings, seed=self.settings.seed)

    @property
    def d_cache(self) -> DynamicCache | None:
        """The drafter's own cache (the model drafter's), else None."""
        return getattr(self.drafter, "cache", None)

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    @property
    def n_generated(self) -> int:
        return len(self.ids) - self.n_prompt

    # ------------------------------------------------------------------------------ round

    def room(self, k: int) -> int:
        """At most k drafts, fewer near max_new_tokens (the round's last token is the
        target's own) and near the models' context length."""
        k = min(k, self.settings.max_new_tokens - self.n_generated - 1)
        if self.max_len is not None:
            k = min(k, self.max_len - len(self.ids))
        return max(k, 0)

    def clock(self) -> PhaseClock:
        """CUDA event pairs when a model is on a GPU (one synchronize a round), else wall
        time (core.engine.clock)."""
        return PhaseClock(on_cuda(self.pair.device, getattr(self.pair, "draft_device", None)))

    @torch.inference_mode()
    def step(self) -> Round:
        """One round (core.engine.round_step: draft, one target pass, verify, the Round), a
        chain or a tree as the settings say."""
        if self.header is None:
            raise RuntimeError("call prefill() before step()")
        if self.finished:
            raise RuntimeError(f"the session has finished ({self.finish_reason})")
        settings = self.settings
        config = SamplingConfig(settings.temperature, settings.top_k, settings.top_p)
        return run_round(self, config)

    def emit(self, emitted: list[int]) -> tuple[list[int], str | None]:
        """Append a round's tokens (up to an end-of-text token) to ids: (what was appended,
        finish_reason or None)."""
        finish = None
        eos = self.pair.eos_token_id
        if eos is not None and eos in emitted and not self.settings.ignore_eos:
            emitted = emitted[: emitted.index(eos) + 1]
            finish = "eos"
        self.ids.extend(emitted)
        if finish is None and self.n_generated >= self.settings.max_new_tokens:
            finish = "max_new_tokens"
        if finish is None and self.max_len is not None and len(self.ids) >= self.max_len:
            finish = "context_length"
        if finish is not None:
            self.drafter.finish(self.ids)
        return emitted, finish

    def run(self, max_rounds: int | None = None):
        """Yield rounds until the session finishes."""
        count = 0
        while not self.finished and (max_rounds is None or count < max_rounds):
            yield self.step()
            count += 1
