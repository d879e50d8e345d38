"""A new head for a target, and the trained head written out: the speculators format (what
specviz, vLLM and speculators read) and SGLang's (SpecForge's export: `midlayer.*`, a Llama
config with `eagle_config`), each checked against the keys its loader needs before a file
is written, and written atomically.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch

from specviz.core.drafters.eagle3.format import save_head
from specviz.core.drafters.eagle3.head import Eagle3Head, HeadConfig
from specviz.core.training.config import TrainError

# What SGLang's LlamaForCausalLMEagle3.load_weights needs (SpecForge checks the same): a
# checkpoint without one would load with random tensors.
SGLANG_KEYS = ("fc.weight", "midlayer.input_layernorm.weight", "midlayer.hidden_norm.weight",
               "midlayer.self_attn.q_proj.weight", "midlayer.self_attn.k_proj.weight",
               "midlayer.self_attn.v_proj.weight", "midlayer.self_attn.o_proj.weight",
               "midlayer.post_attention_layernorm.weight", "midlayer.mlp.gate_proj.weight",
               "midlayer.mlp.up_proj.weight", "midlayer.mlp.down_proj.weight", "norm.weight",
               "lm_head.weight", "d2t", "t2d")  # fmt: skip


def head_config(target_config, layers, draft: int, ttt: int) -> HeadConfig:
    """The head's shapes from the target's config: one Llama layer of the target's width,
    heads and RoPE, with the target's context length (SpecForge PR #271: a head trained
    with a shorter max_position_embeddings collapses on longer contexts)."""
    from transformers import LlamaConfig

    text = target_config.get_text_config()
    hidden = text.hidden_size
    heads = text.num_attention_heads
    if hidden % heads:
        raise TrainError(f"the target's hidden size {hidden} does not split into {heads} heads")
    kv = getattr(text, "num_key_value_heads", None) or heads
    rope = getattr(text, "rope_parameters", None) or {"rope_type": "default",
                                                       "rope_theta": 10000.0}  # fmt: skip
    positions = getattr(text, "max_position_embeddings", None) or getattr(text, "n_positions", 0)
    layer = LlamaConfig(hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv,
                        head_dim=hidden // heads,
                        intermediate_size=getattr(text, "intermediate_size", None) or 4 * hidden,
                        num_hidden_layers=1, vocab_size=text.vocab_size,
                        rms_norm_eps=getattr(text, "rms_norm_eps", None) or 1e-5,
                        max_position_embeddings=max(int(positions or 0), 8192),
                        rope_parameters=rope)  # fmt: skip
    return HeadConfig(layer=layer, aux_layers=tuple(layers), draft_vocab=draft,
                      target_vocab=text.vocab_size, target_hidden=hidden,
                      norm_before_residual=False, speculative_tokens=ttt)  # fmt: skip


def new_head(config: HeadConfig, lm_rows: torch.Tensor, draft_ids: list[int]) -> Eagle3Head:
    """A head whose d2t maps its draft ids, its lm_head the target's rows (frozen)."""
    head = Eagle3Head(config)
    ids = torch.tensor(draft_ids)
    head.d2t.copy_(ids - torch.arange(len(ids)))
    head.lm_head.weight.data.copy_(lm_rows[ids].float().cpu())
    head.lm_head.weight.requires_grad_(False)
    return head


def _move_in(tmp: Path, out: Path) -> None:
    for path in sorted(tmp.iterdir()):
        os.replace(path, out / path.name)
    shutil.rmtree(tmp, ignore_errors=True)


def write_speculators(head: Eagle3Head, out: Path, verifier: str, architectures) -> None:
    """config.json and model.safetensors in `out`, lm_head stored (vLLM needs it)."""
    tmp = Path(tempfile.mkdtemp(dir=out, prefix=".head-"))
    save_head(head, tmp, verifier=verifier, with_lm_head=True,
              verifier_architectures=tuple(architectures))  # fmt: skip
    _move_in(tmp, out)


def sglang_state(head: Eagle3Head) -> dict[str, torch.Tensor]:
    """The head's weights under SGLang's names, checked (TrainError) against SGLANG_KEYS."""
    state = {}
    for key, tensor in head.state_dict().items():
        name = key.replace("layers.0.", "midlayer.", 1)
        state[name] = tensor.contiguous() if key == "d2t" else tensor.to(torch.bfloat16)
    t2d = torch.zeros(head.config.target_vocab, dtype=torch.bool)
    t2d[head.draft_to_target.cpu()] = True
    state["t2d"] = t2d
    missing = [k for k in SGLANG_KEYS if k not in state]
    if missing:
        raise TrainError(f"the SGLang export lacks {', '.join(missing)}")
    return state


def write_sglang(head: Eagle3Head, out: Path) -> None:
    """SGLang's layout in `out`: a Llama config with `draft_vocab_size` and `eagle_config`,
    whose aux layer ids are one less than transformers' (SGLang adds 1: its id i captures
    the output of layer i, the input of layer i + 1)."""
    from safetensors.torch import save_file

    c = head.config
    layer = {k: v for k, v in c.layer.to_diff_dict().items() if not k.startswith("_")}
    layer.update(architectures=["LlamaForCausalLMEagle3"], model_type="llama",
                 num_hidden_layers=1, hidden_size=c.hidden, vocab_size=c.target_vocab,
                 draft_vocab_size=c.draft_vocab, tie_word_embeddings=False,
                 norm_before_residual=c.norm_before_residual, torch_dtype="bfloat16",
                 eagle_config={"eagle_aux_hidden_state_layer_ids": [i - 1 for i in c.aux_layers],
                               "use_aux_hidden_state": True})  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out, prefix=".head-"))
    (tmp / "config.json").write_text(json.dumps(layer, indent=2) + "\n")
    save_file(sglang_state(head), str(tmp / "model.safetensors"), metadata={"format": "pt"})
    _move_in(tmp, out)


def _topk(topk) -> str:
    return f", its top {topk} renormalised," if topk else ""


def model_card(report: dict) -> str:
    """README.md beside the head: what it is for, the data and its licences, the figures."""
    last = report["curve"][-1] if report["curve"] else {}
    best = report.get("best") or {}
    lines = [
        f"# EAGLE-3 head for {report['target']}",
        "",
        f"Trained with `specviz train-head` ({report['date']}): {report['steps']} steps, "
        f"{report['tokens_seen']:,} tokens read, {report.get('trained_tokens', 0):,} of them "
        f"trained, {report['seconds']:.0f} s "
        f"({report['stopped']}).",
        "",
        "## Use",
        "",
        f"- specviz: `specviz run --target {report['target']} --drafter eagle3 --head OUT`",
        '- vLLM: `--speculative-config \'{"method": "eagle3", "model": "OUT", '
        '"num_speculative_tokens": 3}\'`',
        "- SGLang: `--speculative-algorithm EAGLE3 --speculative-draft-model-path OUT/sglang` "
        "(written with `--format sglang`)",
        "",
        "## Head",
        "",
        f"- aux layers (transformers' hidden_states ids): {report['layers']}",
        f"- draft vocabulary: {report['draft_vocab']} tokens; training-time test: "
        f"{report['config']['ttt']} steps",
        f"- recipe: KL to the target's distribution over the draft vocabulary"
        f"{_topk(report['config'].get('topk'))} (computed online "
        f"from its prefill), lr {report['config']['lr']}, global batch "
        f"{report['config']['batch']} sequences, {report['world_size']} rank(s)"
        + (
            f"; warm-started from {report['config']['from_head']} (its weights)"
            if report["config"].get("from_head")
            else ""
        ),
        "",
        "## Data",
        "",
        "| file | kind | weight | bytes | licence |",
        "|---|---|---|---|---|",
    ]
    for s in report["data"]:
        lines.append(f"| {s['path']} | {s['kind']} | {s['weight']} | {s['bytes']:,} | "
                     f"{s['licence']} |")  # fmt: skip
    lines += [
        "",
        "## Figures (held-out, teacher-forced)",
        "",
        f"- last measurement (step {last.get('step', 0)}): acceptance per draft position "
        f"{last.get('acceptance', [])}, expected acceptance {last.get('expected', [])}, "
        f"#MAT at K 3 {last.get('mat_k3', 0)}, at K 4 {last.get('mat_k4', 0)}",
        f"- kept: step {best.get('step', 0)}, #MAT at K 4 {best.get('mat_k4', 0)}",
    ]
    check = report.get("check_head")
    if check:
        own = next((f for f in check["shifts"] if f["shift"] == 0), {})
        lines.append(
            f"- check-head ({check['prompts']} prompts, the target's greedy answers): "
            f"acceptance {own.get('acceptance')}, best_shift {check['best_shift']}"
        )
    return "\n".join(lines) + "\n"
