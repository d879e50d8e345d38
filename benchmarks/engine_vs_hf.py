"""specviz's engine against transformers' assisted generation and target-only decoding.

Same pair, prompts, K, temperature and max new tokens, in one process, interleaved
(a b c d a b c d ...) after a warm-up:
  (a) target-only autoregressive decoding with the target's KV cache (specviz.core.decoding.forward)
  (b) transformers assisted generation, generate(assistant_model=..., constant K)
  (c) specviz's SpeculativeEngine with tracing on (top-N per position, as the app runs it)
  (d) specviz's SpeculativeEngine with tracing off
  (e) transformers' assisted generation as it ships (the assistant's generation config
      untouched: up to 20 tokens, drafting stops under the draft's confidence 0.4)
  (f) specviz with the same rule (the threshold K policy at 0.4, up to 20 tokens)
(b)-(d) draft the same K every round; (e) and (f) decide it as they go.
Tokens/s is generated tokens over wall time, prefill included, per prompt; the figures are
medians over prompts and repeats. Not a test: never part of the test run.
--chat reads the first turns of a Spec-Bench-style question file (resources/prompts/chat.jsonl
by default) through the target's chat template; --dtype loads both models in that dtype.

    python benchmarks/engine_vs_hf.py --pair tiny --k 4 --json
    python benchmarks/engine_vs_hf.py --pair smollm2 --chat --dtype bfloat16 --k 3 \
        --temperatures 0 --prompts 3 --repeats 1 --max-new-tokens 64
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from specviz.core.decoding.forward import decode, measure_ms_per_token  # noqa: E402
from specviz.core.decoding.warp import SamplingConfig  # noqa: E402
from specviz.core.engine.speculative import SpeculativeEngine  # noqa: E402
from specviz.core.metrics.running import predicted_speedup  # noqa: E402
from specviz.core.models.pair import load_pair  # noqa: E402
from specviz.core.resources import example_prompts  # noqa: E402
from specviz.core.trace.records import Settings  # noqa: E402

METHODS = ("target_only", "hf_assisted", "specviz", "specviz_untraced", "hf_default",
           "specviz_threshold")  # fmt: skip
HF_SHIPPED = {"num_assistant_tokens": 20, "num_assistant_tokens_schedule": "constant",
              "assistant_confidence_threshold": 0.4}  # transformers' defaults  # fmt: skip


def time_target_only(pair, ids, settings, seed):
    gen = torch.Generator().manual_seed(seed)
    config = SamplingConfig(settings.temperature, settings.top_k, settings.top_p)
    start = time.perf_counter()
    out = decode(
        pair.target, ids, settings.max_new_tokens, pair.vocab_size, config, gen, pair.eos_token_id
    )
    return len(out), time.perf_counter() - start, None


def time_hf_assisted(pair, ids, settings, seed, shipped=False):
    torch.manual_seed(seed)
    input_ids = torch.tensor([ids])
    sampling = settings.temperature > 0
    kwargs = (
        dict(temperature=settings.temperature, top_k=settings.top_k or None, top_p=settings.top_p)
        if sampling
        else {}
    )
    # transformers reads K, its schedule and the early-stop threshold from the *assistant's*
    # generation config (candidate_generator.AssistedCandidateGenerator), not from generate's
    # arguments: left alone it drafts up to 20 tokens and stops where the draft's confidence
    # falls under 0.4 (re-fitted each round when scikit-learn is installed). Fixed K here.
    assistant = pair.draft.generation_config
    fixed = {"num_assistant_tokens": settings.k, "num_assistant_tokens_schedule": "constant",
             "assistant_confidence_threshold": 0.0}  # never stop drafting early  # fmt: skip
    for name, value in (HF_SHIPPED if shipped else fixed).items():
        setattr(assistant, name, value)
    start = time.perf_counter()
    out = pair.target.generate(
        input_ids,
        attention_mask=torch.ones_like(input_ids),
        assistant_model=pair.draft,
        do_sample=sampling,
        max_new_tokens=settings.max_new_tokens,
        pad_token_id=pair.eos_token_id,
        **kwargs,
    )
    return out.shape[1] - len(ids), time.perf_counter() - start, None


def time_engine(pair, ids, settings, seed, trace, threshold=False):
    import dataclasses

    from specviz.core.decoding.k_policy import PolicyConfig

    policy = None
    if threshold:  # transformers' shipped rule: up to 20 tokens, stop under confidence 0.4
        policy = PolicyConfig("threshold", HF_SHIPPED["assistant_confidence_threshold"])
        settings = dataclasses.replace(settings, k=HF_SHIPPED["num_assistant_tokens"])

    # the engine's loop alone: without the half-precision greedy watch (a diagnostic of the
    # window and `run` that decodes the target alone beside the session, one more pass a token)
    engine = SpeculativeEngine(
        pair,
        dataclasses.replace(settings, seed=seed),
        trace=trace,
        watch_greedy=False,
        policy=policy,
    )
    start = time.perf_counter()
    engine.prefill("", prompt_ids=ids, calibrate=False)
    rounds = list(engine.run())
    elapsed = time.perf_counter() - start
    return engine.n_generated, elapsed, rounds


def bench_pair(pair, name, prompts, settings, repeats):
    tok = pair.tokenizer
    ids_list = [tok(p)["input_ids"] for p in prompts]
    runners = {
        "target_only": lambda ids, s: time_target_only(pair, ids, settings, s),
        "hf_assisted": lambda ids, s: time_hf_assisted(pair, ids, settings, s),
        "specviz": lambda ids, s: time_engine(pair, ids, settings, s, True),
        "specviz_untraced": lambda ids, s: time_engine(pair, ids, settings, s, False),
        "hf_default": lambda ids, s: time_hf_assisted(pair, ids, settings, s, shipped=True),
        "specviz_threshold": lambda ids, s: time_engine(pair, ids, settings, s, True, True),
    }
    for method in METHODS:  # warm-up: allocator, kernels, lazy imports
        runners[method](ids_list[0], 0)
    rates: dict[str, list[float]] = {m: [] for m in METHODS}
    judged_alpha: list[float] = []
    for rep in range(repeats):
        for i, ids in enumerate(ids_list):
            for method in METHODS:  # interleaved: a b c d a b c d ...
                n, seconds, rounds = runners[method](ids, 1000 * rep + i)
                rates[method].append(n / seconds)
                if method == "specviz" and rounds:
                    judged_alpha += [
                        t.alpha
                        for r in rounds
                        for t in r.tokens
                        if t.status in ("accepted", "rejected")
                    ]
    median = {m: statistics.median(v) for m, v in rates.items()}
    alpha = statistics.fmean(judged_alpha) if judged_alpha else 0.0
    target_ms = statistics.median(
        measure_ms_per_token(pair.target, ids, 16, pair.vocab_size) for ids in ids_list[:3]
    )
    draft_ms = statistics.median(
        measure_ms_per_token(pair.draft, ids, 16, pair.vocab_size) for ids in ids_list[:3]
    )
    c = draft_ms / target_ms
    predicted = predicted_speedup(alpha, settings.k, c)
    measured = median["specviz"] / median["target_only"]
    return {
        "pair": name,
        "k": settings.k,
        "temperature": settings.temperature,
        "max_new_tokens": settings.max_new_tokens,
        "prompts": len(prompts),
        "repeats": repeats,
        "tokens_per_s": median,
        "specviz_vs_hf": median["specviz"] / median["hf_assisted"],
        "specviz_untraced_vs_hf": median["specviz_untraced"] / median["hf_assisted"],
        "threshold_vs_hf_default": median["specviz_threshold"] / median["hf_default"],
        "speedup_measured": measured,
        "speedup_untraced": median["specviz_untraced"] / median["target_only"],
        "hf_speedup": median["hf_assisted"] / median["target_only"],
        "speedup_predicted": predicted,
        "measured_over_predicted": measured / predicted,
        "alpha": alpha,
        "c": c,
        "target_ms_per_token": target_ms,
        "draft_ms_per_token": draft_ms,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--pair",
        action="append",
        help="built-in pair name (repeatable); "
        "default: every built-in pair whose files are present",
    )
    parser.add_argument("--target", help="a target (folder or hub id) instead of --pair")
    parser.add_argument("--draft", help="its draft")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--temperatures", default="0,1", help="comma-separated")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    parser.add_argument("--chat", action="store_true", help="questions in the chat template")
    parser.add_argument("--questions", help="with --chat: a Spec-Bench-style question.jsonl "
                        "(default: resources/prompts/chat.jsonl)")  # fmt: skip
    parser.add_argument("--dtype", default="float32", help="float32, bfloat16 or float16")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()

    pairs: list[tuple[str, str, str]] = []
    if args.target or args.draft:
        pairs.append((f"{args.target} + {args.draft}", args.target, args.draft))
    else:
        from specviz.core.models.builtin import BUILTIN_PAIRS

        for name in args.pair or list(BUILTIN_PAIRS):
            pairs.append((name, f"builtin:{name}", f"builtin:{name}"))
    runs = []
    for name, target, draft in pairs:
        pair = load_pair(target, draft, dtype=args.dtype)
        prompts = chat_prompts(pair, args.questions, args.prompts) if args.chat else (
            example_prompts()[: args.prompts])  # fmt: skip
        for temperature in (float(t) for t in args.temperatures.split(",")):
            settings = Settings(
                k=args.k, temperature=temperature, max_new_tokens=args.max_new_tokens
            )
            result = bench_pair(pair, name, prompts, settings, args.repeats)
            result.update(chat=args.chat, dtype=args.dtype)
            runs.append(result)
            if not args.json:
                print_run(result)
    if args.json:
        print(json.dumps({"machine": machine(), "runs": runs}, indent=1))
    return 0


def chat_prompts(pair, path: str | None, count: int) -> list[str]:
    """The first turns of the question file's first `count` questions, in the target's chat
    template (special tokens are in the rendered text: tokenized without adding more)."""
    from specviz.core.bench.questions import load_questions
    from specviz.core.models.chat import render
    from specviz.core.resources import resources_dir

    questions = load_questions(path or resources_dir() / "prompts" / "chat.jsonl", count)
    return [render(pair.tokenizer, q.turns[0]) for q in questions]


def machine() -> dict:
    import os
    import platform

    return {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }


def print_run(r: dict) -> None:
    t = r["tokens_per_s"]
    print(
        f"\n{r['pair']}  K={r['k']}  temperature={r['temperature']}  {r['dtype']}"
        f"{'  chat' if r['chat'] else ''}  "
        f"({r['prompts']} prompts x {r['repeats']}, {r['max_new_tokens']} new tokens)"
    )
    for method in METHODS:
        print(f"  {method:18s} {t[method]:8.1f} tokens/s")
    print(
        f"  specviz / hf          {r['specviz_vs_hf']:.2f}   untraced / hf "
        f"{r['specviz_untraced_vs_hf']:.2f}   threshold / hf default "
        f"{r['threshold_vs_hf_default']:.2f}"
    )
    print(
        f"  speedup measured      {r['speedup_measured']:.2f}x  predicted "
        f"{r['speedup_predicted']:.2f}x  (measured/predicted {r['measured_over_predicted']:.2f})"
    )
    print(f"  alpha {r['alpha']:.3f}  c {r['c']:.3f}  hf speedup {r['hf_speedup']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
