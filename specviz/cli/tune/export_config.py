"""`specviz tune --export ENGINE`: the best configuration a sweep found, in the words of the
engine that serves the model (vLLM, SGLang, llama.cpp, transformers), and what does not
carry over. Names as the engines spell them: vLLM's SpeculativeConfig fields
(vllm/config/speculative.py: method, model, num_speculative_tokens, prompt_lookup_max,
prompt_lookup_min, suffix_decoding_*), SGLang's --speculative-* flags, llama.cpp's --draft-* flags,
transformers' generate() keyword arguments."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

ENGINES = ("vllm", "sglang", "llama.cpp", "transformers")


@dataclass(frozen=True)
class Best:
    """What a sweep found best: who drafted, how K was chosen, K, how drafts were judged."""

    drafter: str  # the registry's kind: model, lookup, early-exit
    params: dict  # the drafter's parameters (ngram_max, exit_layer)
    policy: str  # constant, heuristic, threshold
    threshold: float
    k: int
    verifier: str  # token, block
    draft: str | None  # the draft model's spec (a hub id or a folder), if one drafted


def export(engine: str, best: Best) -> tuple[str, list[str]]:
    """(the settings in `engine`'s form, notes on what does not carry over)."""
    command, notes = {
        "vllm": _vllm,
        "sglang": _sglang,
        "llama.cpp": _llama_cpp,
        "transformers": _transformers,
    }[engine](best)
    if best.draft and best.draft.startswith("builtin:"):
        notes.append(f"{best.draft} is specviz's own pair: give the engine its folder")
    if best.drafter == "eagle3" and not best.params.get("head"):
        notes.append("the built-in pair's own head: give the engine its folder "
                     "(resources/models/PAIR/eagle3, the speculators format)")  # fmt: skip
    if best.verifier.startswith("tree"):
        notes.append(
            f"the token tree ({best.verifier}: width x budget) is not exported: the "
            "engines' draft-model speculation drafts a chain (their trees are EAGLE "
            "heads'); this is the chain of depth K"
        )
    return command, notes


SUFFIX_FIELDS = {  # specviz's suffix parameters, as vLLM's SpeculativeConfig spells them
    "suffix_depth": "suffix_decoding_max_tree_depth",
    "suffix_spec_factor": "suffix_decoding_max_spec_factor",
    "suffix_min_prob": "suffix_decoding_min_token_prob",
    "suffix_cache": "suffix_decoding_max_cached_requests",
}


def vllm_config(best: Best) -> dict:
    """vLLM's speculative_config (the --speculative-config JSON)."""
    config: dict = {"num_speculative_tokens": best.k}
    if best.drafter == "lookup":
        config["method"] = "ngram"
        config["prompt_lookup_max"] = int(best.params.get("ngram_max", 2))
        config["prompt_lookup_min"] = 1
    elif best.drafter == "eagle3":  # vLLM reads a speculators folder or hub id
        config["method"] = "eagle3"
        config["model"] = best.params.get("head") or "EAGLE3_HEAD"
    elif best.drafter == "suffix":  # vLLM's SuffixDecodingProposer (Arctic Inference)
        config["method"] = "suffix"
        for ours, theirs in SUFFIX_FIELDS.items():
            if ours in best.params:
                config[theirs] = best.params[ours]
    else:
        config["method"] = "draft_model"
        config["model"] = best.draft or "DRAFT_MODEL"
    if best.verifier == "block":
        config["rejection_sample_method"] = "block"
    return config


def _vllm(best: Best) -> tuple[str, list[str]]:
    notes = []
    if best.drafter == "early-exit":
        notes.append("vLLM has no early-exit drafter: the draft model line is a placeholder")
    if best.drafter == "suffix" and best.params.get("suffix_cache") == 0:
        notes.append("vLLM always caches earlier outputs: suffix_cache 0 does not carry over")
    if best.policy != "constant":
        notes.append(f"vLLM drafts a constant K: the {best.policy} policy does not carry over")
    if best.verifier == "block":
        notes.append("rejection_sample_method needs a vLLM with block verification")
    flag = f"--speculative-config {shlex.quote(json.dumps(vllm_config(best)))}"
    return f"vllm serve TARGET {flag}", notes


def _sglang(best: Best) -> tuple[str, list[str]]:
    notes = ["SGLang's flags change between releases: check them against yours"]
    if best.drafter == "suffix":
        notes.append("SGLang has no suffix decoding: its n-gram drafter is the nearest")
    if best.drafter in ("lookup", "suffix"):
        args = ["--speculative-algorithm NGRAM", f"--speculative-num-draft-tokens {best.k + 1}"]
    elif best.drafter == "eagle3":
        args = [
            "--speculative-algorithm EAGLE3",
            f"--speculative-draft-model-path {shlex.quote(best.params.get('head') or 'HEAD')}",
            f"--speculative-num-steps {best.k}",
            "--speculative-eagle-topk 1",
            f"--speculative-num-draft-tokens {best.k + 1}",
        ]
    else:
        args = [
            "--speculative-algorithm STANDALONE",
            f"--speculative-draft-model-path {shlex.quote(best.draft or 'DRAFT_MODEL')}",
            f"--speculative-num-steps {best.k}",
            "--speculative-eagle-topk 1",  # a chain, as specviz drafts
            f"--speculative-num-draft-tokens {best.k + 1}",
        ]
    if best.verifier == "block":
        notes.append("block verification: --speculative-use-block-verification (in review)")
    if best.policy != "constant":
        notes.append(f"the {best.policy} K policy does not carry over: SGLang drafts K steps")
    return "python -m sglang.launch_server --model-path TARGET " + " ".join(args), notes


def _llama_cpp(best: Best) -> tuple[str, list[str]]:
    notes = []
    if best.drafter != "model":
        notes.append(f"llama-server drafts with a model: {best.drafter} does not carry over")
    args = [f"-md {shlex.quote(best.draft or 'DRAFT.gguf')}", f"--draft-max {best.k}"]
    if best.policy == "threshold":
        args.append(f"--draft-p-min {best.threshold:g}")
        args.append("--draft-min 0")
    else:
        args.append(f"--draft-min {best.k}")  # constant K
        args.append("--draft-p-min 0")
    if best.verifier == "block":
        notes.append("llama.cpp verifies token by token: block does not carry over")
    return "llama-server -m TARGET.gguf " + " ".join(args), notes


def _transformers(best: Best) -> tuple[str, list[str]]:
    notes = []
    kwargs: dict = {}
    if best.drafter == "suffix":
        notes.append("transformers has no suffix decoding: prompt lookup is the nearest")
    if best.drafter in ("lookup", "suffix"):
        kwargs["prompt_lookup_num_tokens"] = best.k
        kwargs["max_matching_ngram_size"] = int(best.params.get("ngram_max", 2))
    elif best.drafter == "eagle3":
        notes.append("transformers' generate() runs no EAGLE-3 head: a placeholder line")
        kwargs["assistant_model"] = "EAGLE3_HEAD_NOT_SUPPORTED"
    elif best.drafter == "early-exit":
        layer = best.params.get("exit_layer")
        kwargs["assistant_early_exit"] = layer if layer is not None else "HALF_THE_LAYERS"
    else:
        kwargs["assistant_model"] = f"AutoModelForCausalLM.from_pretrained({best.draft!r})"
    if best.drafter not in ("lookup", "suffix"):
        kwargs["num_assistant_tokens"] = best.k
        kwargs["num_assistant_tokens_schedule"] = (
            "heuristic" if best.policy == "heuristic" else "constant"
        )
        kwargs["assistant_confidence_threshold"] = (
            best.threshold if best.policy == "threshold" else 0.0
        )
    if best.verifier == "block":
        notes.append("transformers verifies token by token: block does not carry over")
    text = ", ".join(
        f"{k}={v}" if k == "assistant_model" else f"{k}={v!r}" for k, v in kwargs.items()
    )
    return f"model.generate(**inputs, do_sample=True, {text})", notes


def engine_acceptance(rows_json: dict) -> dict:
    """The acceptance figures as the engines count them, from a table row's: vLLM's mean
    acceptance length counts the bonus token (emitted tokens per target pass); its
    per-position rate divides by every draft, judged or not (specviz's draft efficiency)."""
    return {
        "vllm_mean_acceptance_length": rows_json.get("tokens_per_pass"),
        "specviz_acceptance_rate": rows_json.get("alpha"),
    }
