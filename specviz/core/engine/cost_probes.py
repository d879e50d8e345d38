"""Cost-model probes: short target-only and draft-only passes between rounds.

After some rounds the engine hands itself to `Prober.after_round`, which times, on the
engine's own KV caches at the current context length,

- T_t(1): target-only decoding itself, a few consecutive steps of decoding.forward's `step`
  (forward one token, warp, sample the next, feed it) on the growing cache, the first one
  untimed: the baseline every speedup is measured against. Every timed step is recorded
  (`t1_ms`), and the first rounds of a session each take such a probe, so that the
  baseline is a median of many steps from the start (core.metrics.speedup);
- T_t(n), n > 1: one target pass over n new tokens, then the pick of one token from the
  last row, for the n the cost model needs;
- T_d(1): one draft step (forward, warp, sample), the step a round repeats K times;
- the rule: warping K + 1 rows, verify() and the crop after it (`rule_ms`), the per-round
  work beyond the forward passes, so that the refined prediction needs no round's time;

and crops both caches back to where they were. The probes draw from their own generator,
never the session's, and are timed outside the round's draft_ms / verify_ms, so a session
with probes emits exactly the tokens of one without (tests/test_costmodel.py). The figures
go into the round record (`Round.probes`, trace schema 1.1) and the cost model
(core/metrics/costmodel.py) keeps running medians of them.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch

from specviz.core.decoding.forward import forward, pick, step
from specviz.core.decoding.kv_cache import crop_to
from specviz.core.decoding.verify import verify
from specviz.core.decoding.warp import SamplingConfig, warp

# `engine` below is a SpeculativeEngine (core/engine/speculative.py, which imports this module): its
# pair, settings, ids, max_len, round_index, t_cache and d_cache are read, the caches grown
# and cropped back.
ADVISOR_K_MAX = 16  # the advisor's curve runs K = 1..16, so it needs T_t(n) up to 17


@dataclass(frozen=True)
class ProbePlan:
    """When to probe and how much. A probe costs about (repeats * 2 + 2) target steps and
    repeats + 1 draft steps."""

    every: int = 4  # at least this many rounds between probes (the first is after round 0)
    # At most this share of the session's wall time goes to probes: the next probe waits
    # until the time since the last one is the last one's cost / budget. None: every
    # `every` rounds exactly (tests).
    budget: float | None = 0.1
    repeats: int = 3  # timed passes at n = 1, n = K + 1 and of the draft; medians recorded
    n_max: int = ADVISOR_K_MAX + 1  # the first probe measures T_t(n) for n = 1..n_max
    full_first: bool = True  # False: the first probe is a light one too (later runs of a sweep)
    # After each of the first `warmup` rounds (after the first probe), a probe of T_t(1)
    # alone: `repeats` timed decoding steps each, so that the baseline is a median of
    # (warmup + 1) * repeats steps spread over the session's start, never one burst.
    warmup: int = 3


def _split() -> bool:
    """A target split over ranks (core.models.tensor_parallel): every rank must probe after
    the same rounds, or one rank's probe pass waits forever on the others' layers. The time
    budget differs between ranks; a fixed period does not."""
    dist = torch.distributed
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


class Prober:
    """Times target and draft passes between rounds of one engine. One owner thread."""

    def __init__(self, plan: ProbePlan | None = None):
        self.plan = plan or (ProbePlan(budget=None) if _split() else ProbePlan())
        self.generator = torch.Generator()  # the probes' own draws: the session's stay intact
        self.generator.manual_seed(0)
        self._next_n = 2  # the one extra n each later probe measures, in rotation
        self._full_requested = False
        self._last_round = 0  # round index of the last probe
        self._last_end = 0.0  # perf_counter at its end
        self._last_cost = 0.0  # its duration, s

    def request_full(self) -> None:
        """Any thread: a full probe (every n) after the next round ("Re-measure")."""
        self._full_requested = True

    def due(self, round_index: int) -> bool:
        if self._full_requested or round_index <= self.plan.warmup:
            return True
        plan = self.plan
        if plan.budget is None:
            return round_index % max(plan.every, 1) == 0
        waited = time.perf_counter() - self._last_end
        return (
            round_index - self._last_round >= plan.every and waited * plan.budget >= self._last_cost
        )

    def after_round(self, engine) -> dict[str, Any] | None:
        """Probe if one is due after the engine's current round; the record's `probes`."""
        if not self.due(engine.round_index):
            return None
        index = engine.round_index
        full = (index == 0 and self.plan.full_first) or self._full_requested
        self._full_requested = False
        start = time.perf_counter()
        if not full and 0 < index <= self.plan.warmup:
            record = self.probe_baseline(engine)
        else:
            record = self.probe(engine, full=full)
        self._last_end = time.perf_counter()
        self._last_cost = 0.0 if full else self._last_end - start  # a full one is rare
        self._last_round = engine.round_index
        return record

    @torch.inference_mode()
    def probe(self, engine, full: bool = False) -> dict[str, Any] | None:
        """{"context_len", "target_ms": [[n, ms], ...], "draft_ms"} at the current context.

        full: T_t(n) for every n = 1..n_max once more (session start); otherwise n = 1 and
        n = K + 1 `repeats` times and one other n in rotation. Caches are left as found.
        """
        pair, ids = engine.pair, engine.ids
        if pair.device.type != "cpu" and self.generator.device != pair.device:
            self.generator = torch.Generator(device=pair.device)
            self.generator.manual_seed(0)
        settings = engine.settings
        config = SamplingConfig(settings.temperature, settings.top_k, settings.top_p)
        t_len = engine.t_cache.get_seq_length()
        # a round's pass: the last token and K drafts, or a tree's nodes (up to its budget)
        size = settings.tree_budget + 1 if settings.tree else settings.k + 1
        n_max = max(self.plan.n_max, size)
        room = n_max if engine.max_len is None else engine.max_len - t_len
        n_hi = min(n_max, room)
        if n_hi < 1:
            return None
        k1 = min(size, n_hi)
        # Steps of a decoding loop follow one another, with the model's weights warm in the
        # CPU caches: T_d(1) and T_t(1) are timed over consecutive passes after one untimed
        # pass (timed right after other work they read ~15% slow on this CPU's tiny pair).
        # T_t(1) first, right after the round's verify pass: timed after the draft probes,
        # one untimed pass did not warm the target back up, and the baseline read 7% above
        # a target-only decoding loop (benchmarks/tune_accuracy.py, meas/true 1.07).
        times: dict[int, list[float]] = {1: self._decode_ms(engine, ids, t_len, config, n_hi)}
        draft_times = [self._draft_ms(engine, ids, config) for _ in range(self.plan.repeats + 1)]
        if full:
            plan = [k1] * self.plan.repeats + [n for n in range(2, n_hi + 1) if n != k1]
        else:
            extra = self._next_n if self._next_n <= n_hi else 2
            self._next_n = extra + 1 if extra < n_max else 2
            plan = [k1] * self.plan.repeats + ([extra] if 2 <= n_hi and extra != k1 else [])
        rule_ms = None
        for n in plan:
            if n > 1:
                ms, logits = self._target_ms(engine, ids, n, t_len, config)
                times.setdefault(n, []).append(ms)
                if n == k1 and rule_ms is None:
                    rule_ms = self._rule_ms(engine, logits, t_len, config)
        return {
            "context_len": len(ids),
            "target_ms": [[n, statistics.median(ms)] for n, ms in sorted(times.items())],
            "draft_ms": statistics.median(draft_times[1:]),
            "t1_ms": times[1],
            "rule_ms": rule_ms,
        }

    @torch.inference_mode()
    def probe_baseline(self, engine) -> dict[str, Any] | None:
        """T_t(1) alone: {"context_len", "target_ms": [[1, median]], "t1_ms": [...]}."""
        settings, ids = engine.settings, engine.ids
        config = SamplingConfig(settings.temperature, settings.top_k, settings.top_p)
        t_len = engine.t_cache.get_seq_length()
        room = self.plan.n_max if engine.max_len is None else engine.max_len - t_len
        if room < 1:
            return None
        t1 = self._decode_ms(engine, ids, t_len, config, room)
        return {"context_len": len(ids), "target_ms": [[1, statistics.median(t1)]], "t1_ms": t1}

    def _decode_ms(self, engine, ids, t_len: int, config: SamplingConfig, room: int) -> list:
        """T_t(1) as target-only decoding really runs: `repeats` + 1 consecutive steps of
        decode()'s own `step`, each fed the token the last one sampled, on a cache that
        grows; the first is untimed. Cropped back after. Milliseconds of the timed steps."""
        pair, token, times = engine.pair, ids[-1], []
        for _ in range(min(self.plan.repeats + 1, room)):
            start = time.perf_counter()
            token = step(
                pair.target, token, engine.t_cache, pair.vocab_size, config, self.generator
            )
            times.append(1000 * (time.perf_counter() - start))
        crop_to(engine.t_cache, t_len)
        return times[1:] or times

    def _target_ms(self, engine, ids, n: int, t_len: int, config: SamplingConfig):
        """(ms, logits [n, V]) of one target pass over n tokens and the pick of one."""
        pair = engine.pair
        tokens = [ids[-1]] * n  # what the tokens are does not change the cost
        start = time.perf_counter()
        logits = forward(pair.target, tokens, engine.t_cache, pair.vocab_size, keep=n)
        self._pick(logits[-1], config)
        ms = 1000 * (time.perf_counter() - start)
        crop_to(engine.t_cache, t_len)
        return ms, logits

    def _rule_ms(self, engine, logits: torch.Tensor, t_len: int, config: SamplingConfig) -> float:
        """A round's work beyond its passes, on a K + 1 pass's logits: warp every row, the
        rule (a draft that agrees: q = p's first K rows) and a crop of the cache."""
        start = time.perf_counter()
        p = warp(logits, config)  # [K+1, V]
        q = p[:-1]  # [K, V]
        drafted = p[:-1].argmax(dim=-1)  # [K]
        verify(p, q, drafted, self.generator)
        crop_to(engine.t_cache, t_len)
        return 1000 * (time.perf_counter() - start)

    def _draft_ms(self, engine, ids, config: SamplingConfig) -> float:
        """One draft step, as the drafter itself times it (on its own cache, if it has one)."""
        return engine.drafter.step_ms(ids, config, self.generator, engine.pair.device)

    def _pick(self, logits: torch.Tensor, config: SamplingConfig) -> int:
        """The sampling step of a decoding step (it also waits for the device)."""
        return pick(logits, config, self.generator)
