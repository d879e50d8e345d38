"""`specviz bench`: configurations side by side on benchmark questions, with the target
alone interleaved per question (its table: core.bench.table).

A configuration is `DRAFTER:K[+RULE]` (`model:4`, `lookup:3`, `eagle3:4`, `model:4+tree2x16`,
`model:4+block`): any drafter of core.drafters.registry, a constant K, and the chain's
verifier or a token tree (core.tune.sweep.tree_label). Each is a full speculative session on
tune's engine path (core.tune.sweep.run_session), without cost-model probes, timed whole
(prefill included), without the half-precision greedy watch (whose target-alone passes would
be timed; bench compares every greedy text with its own target-alone run); the target
alone is core.decoding.forward.decode, timed the same way.
Per question the runs go in an order shuffled from the seed, target alone among them, so a
slow spell of a busy machine falls on several configurations, not on one. A suffix
decoding configuration keeps its own cache of earlier outputs for the bench, empty at the
start and never saved (core.drafters.suffix.own_cache): it learns from its own earlier
questions, as in a run of the questions one after another, and never reads another
configuration's answer to the same question or an earlier bench's.

A question of several turns runs them in order, each turn after the model's own answers to
the earlier ones: with a chat template, the conversation so far (user, assistant, user, ...);
without one, the earlier prompt's tokens, the emitted tokens, then a blank line and the next
turn. Headless and thread-agnostic; `cancel` is checked between rounds.
"""

from __future__ import annotations

import dataclasses
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from specviz.core.bench.questions import Question
from specviz.core.bench.results import (
    TARGET,
    BenchConfig,
    BenchResult,
    BenchSettings,
    QuestionRun,
    RoundFigures,
    TurnRun,
)
from specviz.core.decoding.forward import decode, max_positions
from specviz.core.drafters.registry import DrafterConfig, spec
from specviz.core.drafters.suffix import own_cache
from specviz.core.metrics.costmodel import tree_depth
from specviz.core.metrics.positions import judged_pairs
from specviz.core.trace import verifiers
from specviz.core.trace.records import Round, Settings
from specviz.core.tune.sweep import SweepConfig, rule_fields, run_session

_CONFIG = re.compile(r"([A-Za-z0-9_-]+):([0-9]+)(?:\+([A-Za-z0-9_]+))?")


def parse_configs(text: str, params: Mapping[str, Any] | None = None) -> tuple[BenchConfig, ...]:
    """`--configs model:4,lookup:3,model:4+tree2x16` -> configurations; ValueError naming the
    bad one. params: the drafter parameters given on the command line (name -> value or
    None); each drafter takes those its registry spec lists, so a newly registered drafter
    (eagle3 and its --head) needs nothing here."""
    params = dict(params or {})
    configs: list[BenchConfig] = []
    for part in (p.strip() for p in text.split(",")):
        match = _CONFIG.fullmatch(part)
        if match is None:
            raise ValueError(
                f"--configs: {part!r} is not DRAFTER:K[+RULE] (e.g. model:4, lookup:3, "
                "model:4+tree2x16, model:4+block)"
            )
        kind, k, rule = match[1], int(match[2]), match[3] or "token"
        s = spec(kind)  # ValueError: "unknown drafter 'x' (one of model, lookup, ...)"
        drafter = DrafterConfig(kind, **{p.name: params.get(p.name) for p in s.params})
        drafter.validate()
        chains = verifiers.names(trees=False)
        if rule not in chains and "tree_width" not in rule_fields(rule):
            raise ValueError(
                f"--configs: {part!r}: unknown rule {rule!r} (a verifier: "
                f"{', '.join(chains)}; or a tree: tree2x16, width x budget)"
            )
        if rule in verifiers.names(lossless=False):
            raise ValueError(
                f"--configs: {part!r}: {rule} is lossy; a bench compares configurations that "
                "keep the target's output"
            )
        config = BenchConfig(part, drafter, k, rule)
        try:
            bench_settings(config, BenchSettings()).validate()  # K, the tree's shape
        except ValueError as e:
            raise ValueError(f"--configs: {part!r}: {e}") from None
        if "tree_width" in rule_fields(rule) and not s.drafts_trees:
            raise ValueError(f"--configs: {part!r}: the {kind} drafter drafts chains only")
        if part in (c.label for c in configs):
            raise ValueError(f"--configs: {part!r} is named twice")
        configs.append(config)
    return tuple(configs)


def bench_settings(config: BenchConfig, settings: BenchSettings) -> Settings:
    """The engine's Settings for one configuration's runs."""
    return _sweep_config(config, settings).run_settings(config.k)


def _sweep_config(config: BenchConfig, s: BenchSettings) -> SweepConfig:
    return SweepConfig(ks=(config.k,), settings=s.settings, drafter=config.drafter,
                       verifier=config.rule)  # fmt: skip


def bench_plan(n_questions: int, labels: Sequence[str], seed: int = 0) -> list[tuple[int, str]]:
    """(question index, label) in run order: question by question, the target alone and
    every configuration in an order shuffled per question."""
    rng = random.Random(seed)
    plan = []
    for i in range(n_questions):
        order = [TARGET, *labels]
        rng.shuffle(order)
        plan.extend((i, label) for label in order)
    return plan


def _figures(rnd: Round) -> RoundFigures:
    drafted = tree_depth(rnd) if rnd.tree is not None else rnd.n_drafted
    return RoundFigures(rnd.n_emitted, rnd.n_accepted, drafted, len(judged_pairs(rnd)))


def _turn_prompt(pair, question: Question, turn: int, answers: list, chat: bool):
    """(prompt text, prompt ids or None) for one turn after the earlier answers
    (answers: (prompt ids, emitted ids) of each earlier turn)."""
    if chat:
        from specviz.core.models.chat import render_messages

        messages = []
        for text, (_, emitted) in zip(question.turns, answers, strict=False):
            reply = pair.tokenizer.decode(list(emitted), skip_special_tokens=True)
            messages += [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
        messages.append({"role": "user", "content": question.turns[turn]})
        return render_messages(pair.tokenizer, messages), None
    if turn == 0:
        return question.turns[0], None
    prompt_ids, emitted = answers[-1]
    follow = "\n\n" + question.turns[turn]
    ids = list(prompt_ids) + list(emitted) + list(pair.tokenizer(follow)["input_ids"])
    return follow, ids


def _tokens(pair, text: str, ids: list[int] | None) -> list[int]:
    if ids is not None:
        return ids
    out = list(pair.tokenizer(text)["input_ids"])
    if not out:
        raise ValueError("a turn gives no tokens")
    return out


def _sync(pair) -> None:
    if pair.device.type == "cuda":
        torch.cuda.synchronize(pair.device)


def run_question(
    pair,
    question: Question,
    index: int,
    config: BenchConfig | None,
    settings: BenchSettings,
    cancel: threading.Event | None = None,
) -> QuestionRun:
    """Every turn of one question under a configuration (None: the target alone)."""
    answers: list[tuple[list[int], tuple[int, ...]]] = []
    turns = []
    for t in range(len(question.turns)):
        text, ids = _turn_prompt(pair, question, t, answers, settings.chat)
        prompt_ids = _tokens(pair, text, ids)
        limit = max_positions(pair.target)
        if limit is not None and len(prompt_ids) >= limit:
            raise ValueError(
                f"question {question.question_id}, turn {t + 1}: the prompt is "
                f"{len(prompt_ids)} tokens; the target reads at most {limit}"
            )
        new_tokens = settings.settings.max_new_tokens
        if limit is not None:  # as the engine stops at the context's end
            new_tokens = min(new_tokens, limit - len(prompt_ids))
        if config is None:
            generator = torch.Generator(device=pair.device)
            generator.manual_seed(settings.settings.seed)
            _sync(pair)
            start = time.perf_counter()
            out = decode(
                pair.target, prompt_ids, new_tokens, pair.vocab_size,
                settings.sampling, generator, pair.eos_token_id,
            )  # fmt: skip
            _sync(pair)
            turn = TurnRun(tuple(out), time.perf_counter() - start)
        else:
            _sync(pair)
            start = time.perf_counter()
            # no greedy watch: its passes would be timed, and the target alone's run is here
            _, rounds = run_session(
                pair, text, config.k, _sweep_config(config, settings), cancel,
                probe=False, prompt_ids=prompt_ids, watch_greedy=False,
            )  # fmt: skip
            _sync(pair)
            seconds = time.perf_counter() - start
            emitted = tuple(tok.id for r in rounds for tok in r.tokens if tok.emitted)
            turn = TurnRun(emitted, seconds, tuple(_figures(r) for r in rounds))
        turns.append(turn)
        answers.append((prompt_ids, turn.tokens))
        if cancel is not None and cancel.is_set():
            break
    label = TARGET if config is None else config.label
    return QuestionRun(index, question.category, label, tuple(turns))


def run_bench(
    pair,
    questions: Sequence[Question],
    configs: Sequence[BenchConfig],
    settings: BenchSettings,
    cancel: threading.Event | None = None,
    on_run: Callable[[int, int, QuestionRun], None] | None = None,
) -> BenchResult:
    """Every question under the target alone and every configuration, interleaved.
    on_run(done, total, run) after each run, on the calling thread. A set `cancel` stops
    between rounds; the run in progress is dropped and the result marked cancelled."""
    by_label = {c.label: c for c in configs}
    plan = bench_plan(len(questions), list(by_label), settings.settings.seed)
    result = BenchResult(configs=tuple(configs), questions=tuple(questions), settings=settings)
    if settings.warmup and questions:
        first = Question("warmup", questions[0].category, questions[0].turns[:1])
        session = settings.settings
        short = dataclasses.replace(
            settings,
            settings=dataclasses.replace(session, max_new_tokens=min(8, session.max_new_tokens)),
        )
        for config in (None, *configs):
            with own_cache({}, "warm-up"):  # its outputs are not remembered
                run_question(pair, first, 0, config, short, cancel)
    caches: dict = {}  # a suffix configuration's own cache, by label
    for i, label in plan:
        if cancel is not None and cancel.is_set():
            break
        with own_cache(caches, label):
            run = run_question(pair, questions[i], i, by_label.get(label), settings, cancel)
        if cancel is not None and cancel.is_set():
            break
        result.runs.append(run)
        if on_run is not None:
            on_run(len(result.runs), len(plan), run)
    result.cancelled = cancel is not None and cancel.is_set()
    return result
