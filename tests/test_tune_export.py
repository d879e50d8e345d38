"""`specviz tune --export`: the best configuration in the serving engines' own words."""

from __future__ import annotations

import json

from specviz.cli.main import main
from specviz.cli.tune.export_config import Best, export, vllm_config

# vllm/config/speculative.py's SpeculativeConfig fields that the export may use.
VLLM_FIELDS = {
    "method", "model", "num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min",
    "rejection_sample_method",
}  # fmt: skip


def best(**kw) -> Best:
    values = dict(drafter="model", params={}, policy="constant", threshold=0.4, k=5,
                  verifier="token", draft="org/draft")  # fmt: skip
    return Best(**{**values, **kw})


def test_vllm_gets_its_speculative_config_fields():
    config = vllm_config(best())
    assert set(config) <= VLLM_FIELDS
    assert config == {"num_speculative_tokens": 5, "method": "draft_model", "model": "org/draft"}
    lookup = vllm_config(best(drafter="lookup", params={"ngram_max": 3}, draft=None))
    assert lookup["method"] == "ngram" and lookup["prompt_lookup_max"] == 3
    assert vllm_config(best(verifier="block"))["rejection_sample_method"] == "block"


def test_each_engine_says_what_does_not_carry_over():
    command, notes = export("llama.cpp", best(policy="threshold", threshold=0.3))
    assert "--draft-max 5" in command and "--draft-p-min 0.3" in command and not notes
    _, notes = export("vllm", best(policy="heuristic"))
    assert any("heuristic" in n for n in notes)
    command, _ = export("transformers", best(drafter="early-exit", params={"exit_layer": 4}))
    assert "assistant_early_exit=4" in command and "num_assistant_tokens=5" in command
    command, notes = export("sglang", best())
    assert "--speculative-num-steps 5" in command and "--speculative-num-draft-tokens 6" in command


def test_tune_exports_the_best_k_it_found(pair_dirs, capsys, tmp_path):
    prompts = tmp_path / "p.txt"
    prompts.write_text("In the beginning\nA fool and his money\n")
    target, draft = (str(d) for d in pair_dirs)
    args = ["tune", "--target", target, "--draft", draft, "--prompts", str(prompts), "--k", "1-2"]
    assert main([*args, "--max-new-tokens", "8", "--export", "vllm", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    command = out["export"]["command"]
    config = json.loads(command.split("--speculative-config ", 1)[1].strip("'"))
    assert config["num_speculative_tokens"] == out["best_k"] and config["model"] == draft


def test_an_eagle3_head_exports_as_the_engines_name_it():
    head = Best("eagle3", {"head": "/models/head"}, "constant", 0.4, 4, "token", None)
    assert vllm_config(head) == {
        "num_speculative_tokens": 4,
        "method": "eagle3",
        "model": "/models/head",
    }
    command, notes = export("sglang", head)
    assert "--speculative-algorithm EAGLE3" in command
    assert "--speculative-draft-model-path /models/head" in command and not notes[1:]
    _, notes = export("vllm", Best("eagle3", {}, "constant", 0.4, 3, "token", None))
    assert any("resources/models/PAIR/eagle3" in n for n in notes)  # the built-in head
    _, notes = export("llama.cpp", head)
    assert notes == ["llama-server drafts with a model: eagle3 does not carry over"]
