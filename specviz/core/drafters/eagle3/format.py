"""EAGLE-3 heads on disk: the speculators format (what `vllm serve DIR` reads) and the EAGLE
authors' original layout, read with every check the engines leave out, and written.

speculators (vllm-project/speculators, `Eagle3SpeculatorConfig`): config.json has
`speculators_model_type: "eagle3"`, `transformer_layer_config` (a Llama config dict),
`draft_vocab_size`, `norm_before_residual`, `eagle_aux_hidden_state_layer_ids` and
`speculators_config` {proposal_methods: [{speculative_tokens, ...}], verifier:
{name_or_path, architectures}}; weights `fc.weight`, `layers.0.*` (older: `midlayer.*`),
`norm.weight`, `lm_head.weight`, `d2t`, `t2d`, optionally `embed_tokens.weight`. The
original layout (SafeAILab/EAGLE) is a Llama config.json with `draft_vocab_size` and the
same weights under `midlayer.*`, in model.safetensors or pytorch_model.bin. SGLang's
(SpecForge's export, `specviz train-head --format sglang`) is that layout with the aux layers
in `eagle_config.eagle_aux_hidden_state_layer_ids`, one less than transformers' ids: SGLang
captures layer id + 1 (`set_eagle3_layers_to_capture`), so they are read + 1.

A head that does not fit its target is refused in one line (HeadError) naming what differs
and what it would cost; what only might cost acceptance is a warning (`notes`).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from specviz.core.drafters.eagle3.head import Eagle3Head, HeadConfig

CONFIG_MAX = 1 << 20  # bytes of config.json read at most (a head's is about 2 KB)
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


class HeadError(ValueError):
    """A head that cannot be used with this target; the message says why, in one line."""


def _read_json(path: Path) -> dict:
    try:
        size = path.stat().st_size
    except OSError as e:
        raise HeadError(f"head {path.parent}: no config.json ({e.strerror})") from None
    if size > CONFIG_MAX:
        raise HeadError(f"head {path.parent}: config.json is {size:,} bytes (a head's "
                        f"is a few KB; refusing more than {CONFIG_MAX:,})")  # fmt: skip
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise HeadError(f"head {path.parent}: config.json is not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise HeadError(f"head {path.parent}: config.json is not a JSON object")
    return obj


def _int(obj: dict, key: str, where: str, low: int = 1) -> int:
    value = obj.get(key)
    if type(value) is not int or value < low:
        raise HeadError(f"{where}: {key} must be an integer >= {low}, got {value!r:.60}")
    return value


def read_config(folder: Path, target_layers: int) -> tuple[HeadConfig, str, list[str]]:
    """(config, layout "speculators" | "eagle" | "sglang", notes) of the head in `folder`."""
    from transformers import LlamaConfig

    raw = _read_json(folder / "config.json")
    notes: list[str] = []
    where = f"head {folder}"
    if "speculators_model_type" in raw:
        if raw["speculators_model_type"] != "eagle3":
            raise HeadError(f"{where}: speculators_model_type is "
                            f"{raw['speculators_model_type']!r:.40}, not 'eagle3'")  # fmt: skip
        layout, layer = "speculators", raw.get("transformer_layer_config")
        if not isinstance(layer, dict):
            raise HeadError(f"{where}: transformer_layer_config must be an object")
        if "norm_before_residual" not in raw:
            notes.append("config.json has no norm_before_residual: read as false "
                         "(speculators' default; vLLM reads a missing one as true)")  # fmt: skip
    elif any("eagle3" in str(a).lower() for a in raw.get("architectures") or ()):
        layout, layer = "eagle", raw
    else:
        raise HeadError(f"{where}: not an EAGLE-3 head (no speculators_model_type 'eagle3' "
                        "and no Eagle3 architecture in config.json)")  # fmt: skip
    for key in ("hidden_size", "num_attention_heads", "intermediate_size", "vocab_size"):
        _int(layer, key, where)
    if layer.get("num_hidden_layers", 1) != 1:
        raise HeadError(
            f"{where}: {layer.get('num_hidden_layers')!r:.20} decoder layers; "
            "specviz runs one-layer EAGLE-3 heads (as vLLM's llama_eagle3)"
        )
    fields = {k: v for k, v in layer.items() if not k.startswith("_") and k not in (
        "architectures", "auto_map", "transformers_version", "model_type")}  # fmt: skip
    try:
        llama = LlamaConfig(**fields)
    except (TypeError, ValueError, KeyError) as e:
        raise HeadError(f"{where}: transformer_layer_config is not a Llama config ({e})") from None
    if llama.num_attention_heads % max(llama.num_key_value_heads, 1):
        raise HeadError(f"{where}: {llama.num_attention_heads} attention heads do not divide "
                        f"into {llama.num_key_value_heads} KV heads")  # fmt: skip
    ids = raw.get("eagle_aux_hidden_state_layer_ids")
    nested = raw.get("eagle_config") if isinstance(raw.get("eagle_config"), dict) else {}
    if ids is None and layout == "eagle" and nested.get("eagle_aux_hidden_state_layer_ids"):
        stored = nested["eagle_aux_hidden_state_layer_ids"]
        if not isinstance(stored, list) or any(type(i) is not int for i in stored):
            raise HeadError(f"{where}: eagle_config.eagle_aux_hidden_state_layer_ids must be "
                            f"a list of layer numbers, got {stored!r:.60}")  # fmt: skip
        layout, ids = "sglang", [i + 1 for i in stored]
        notes.append(f"SGLang's layout: eagle_config's aux layer ids {stored} read as {ids} "
                     "(SGLang captures id + 1)")  # fmt: skip
    if ids is None:
        ids = [2, target_layers // 2, target_layers - 3]
        notes.append(f"no eagle_aux_hidden_state_layer_ids: the target's default layers "
                     f"{ids} (2, L // 2, L - 3)")  # fmt: skip
    if not isinstance(ids, list) or not ids or any(type(i) is not int for i in ids):
        raise HeadError(f"{where}: eagle_aux_hidden_state_layer_ids must be a list of "
                        f"layer numbers, got {ids!r:.60}")  # fmt: skip
    outside = [i for i in ids if not 0 <= i < target_layers]
    if outside:
        raise HeadError(f"{where}: aux layers {outside} are outside the target's "
                        f"{target_layers} layers (0..{target_layers - 1})")  # fmt: skip
    spec = raw.get("speculators_config") if isinstance(raw.get("speculators_config"), dict) else {}
    methods = spec.get("proposal_methods") or [{}]
    tokens = methods[0].get("speculative_tokens", 3) if isinstance(methods[0], dict) else 3
    verifier = spec.get("verifier") if isinstance(spec.get("verifier"), dict) else {}
    config = HeadConfig(
        layer=llama,
        aux_layers=tuple(ids),
        draft_vocab=_int(raw, "draft_vocab_size", where) if "draft_vocab_size" in raw
        else llama.vocab_size,
        target_vocab=llama.vocab_size,
        target_hidden=raw.get("target_hidden_size") or llama.hidden_size,
        norm_before_residual=bool(raw.get("norm_before_residual", False)),
        speculative_tokens=tokens if type(tokens) is int and 1 <= tokens <= 64 else 3,
        verifier=verifier.get("name_or_path") if isinstance(verifier.get("name_or_path"), str)
        else None,
    )  # fmt: skip
    return config, layout, notes


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    for name in WEIGHT_FILES:
        path = folder / name
        if not path.is_file():
            continue
        try:
            if name.endswith(".safetensors"):
                from safetensors.torch import load_file

                state = load_file(str(path))
            else:
                state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - any fault of the file is the user's to fix
            raise HeadError(f"head {folder}: {name} cannot be read ({type(e).__name__}: "
                            f"{str(e).splitlines()[0] if str(e) else ''})") from None  # fmt: skip
        if not isinstance(state, dict):
            raise HeadError(f"head {folder}: {name} holds no state dict")
        return {k.replace("midlayer.", "layers.0.", 1): v for k, v in state.items()}
    raise HeadError(f"head {folder}: no weights ({' or '.join(WEIGHT_FILES)})")


def build_head(folder: Path, target_layers: int, target_hidden: int, target_vocab: int,
               lm_head_from: torch.Tensor | None = None, lm_head_note: bool = True):  # fmt: skip
    """(Eagle3Head in float32, HeadConfig, notes): the head in `folder`, checked against a
    target of `target_layers` layers, hidden size `target_hidden`, `target_vocab` ids.
    lm_head_from [target_vocab, H]: rows for a head saved without lm_head (the built-in
    heads keep the target's frozen head, selected by d2t); lm_head_note: say so in the notes
    (not for a head stored so on purpose)."""
    config, layout, notes = read_config(folder, target_layers)
    where = f"head {folder}"
    if config.target_hidden != target_hidden:
        raise HeadError(f"{where}: made for a target of hidden size {config.target_hidden}; "
                        f"this target's is {target_hidden}")  # fmt: skip
    if config.target_vocab != target_vocab:
        raise HeadError(f"{where}: made for a vocabulary of {config.target_vocab} tokens; "
                        f"this target has {target_vocab}")  # fmt: skip
    state = _weights(folder)
    reduced = config.draft_vocab != config.target_vocab
    if reduced and "d2t" not in state:
        raise HeadError(f"{where}: a draft vocabulary of {config.draft_vocab} of the target's "
                        f"{config.target_vocab} tokens but no d2t map: every draft id would "
                        "be read as a target id and acceptance would collapse")  # fmt: skip
    if "lm_head.weight" not in state and lm_head_from is not None and "d2t" in state:
        ids = torch.arange(config.draft_vocab) + state["d2t"].long()
        if ids.min() >= 0 and ids.max() < lm_head_from.shape[0]:
            state["lm_head.weight"] = lm_head_from[ids].float()
            if lm_head_note:
                notes.append("no lm_head.weight stored: the target's LM head rows are used, "
                             "chosen by d2t (vLLM needs lm_head written)")  # fmt: skip
    embed = state.pop("embed_tokens.weight", None)
    t2d = state.pop("t2d", None)
    head = Eagle3Head(config)
    expected = head.state_dict()
    missing = sorted(set(expected) - set(state))
    if missing:
        raise HeadError(f"{where}: weights missing: {', '.join(missing[:4])}"
                        + (" ..." if len(missing) > 4 else ""))  # fmt: skip
    extra = sorted(k for k in set(state) - set(expected) if not k.startswith("verifier_"))
    if extra:
        notes.append(f"weights not used: {', '.join(extra[:4])}")
    for key, tensor in expected.items():
        got = state[key]
        if tuple(got.shape) != tuple(tensor.shape):
            raise HeadError(f"{where}: {key} has shape {list(got.shape)}, the config asks "
                            f"for {list(tensor.shape)}")  # fmt: skip
        if got.is_floating_point() and not bool(torch.isfinite(got).all()):
            raise HeadError(f"{where}: {key} holds NaN or infinite values")
    _check_maps(state["d2t"].long(), t2d, config, where)
    head.load_state_dict({k: state[k].to(v.dtype) for k, v in expected.items()})
    if embed is not None and tuple(embed.shape) != (target_vocab, config.hidden):
        raise HeadError(f"{where}: embed_tokens.weight has shape {list(embed.shape)}, "
                        f"expected {[target_vocab, config.hidden]}")  # fmt: skip
    head.embed = embed.float() if embed is not None else None
    if layout == "eagle":
        notes.append("the EAGLE authors' layout (midlayer.*), read as speculators'")
    return head.eval(), config, notes


def _check_maps(d2t: torch.Tensor, t2d: torch.Tensor | None, config: HeadConfig, where: str):
    target = torch.arange(config.draft_vocab) + d2t
    if target.min() < 0 or target.max() >= config.target_vocab:
        raise HeadError(f"{where}: d2t maps draft ids outside the target's "
                        f"{config.target_vocab} ids")  # fmt: skip
    if target.unique().numel() != target.numel():
        raise HeadError(f"{where}: d2t maps two draft ids to one target id")
    if t2d is not None:
        if t2d.shape != (config.target_vocab,) or int(t2d.bool().sum()) != config.draft_vocab:
            raise HeadError(f"{where}: t2d must mark {config.draft_vocab} of "
                            f"{config.target_vocab} target ids")  # fmt: skip
        if not bool(t2d.bool()[target].all()):
            raise HeadError(f"{where}: t2d and d2t disagree on the draft vocabulary")


def save_head(head: Eagle3Head, folder: Path, verifier: str, with_lm_head: bool = True,
              dtype: torch.dtype = torch.bfloat16,
              verifier_architectures: tuple[str, ...] = ("LlamaForCausalLM",)) -> None:  # fmt: skip
    """Write a head in the speculators format (config.json, model.safetensors); without
    lm_head when the loader rebuilds it from the target (the built-in heads)."""
    from safetensors.torch import save_file

    c = head.config
    folder.mkdir(parents=True, exist_ok=True)
    layer = {k: v for k, v in c.layer.to_diff_dict().items() if not k.startswith("_")}
    layer.update(model_type="llama", architectures=["LlamaForCausalLM"], num_hidden_layers=1,
                 hidden_size=c.hidden, vocab_size=c.target_vocab)  # fmt: skip
    config = {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "speculators_version": "0.3.0",
        "transformer_layer_config": layer,
        "draft_vocab_size": c.draft_vocab,
        "norm_before_residual": c.norm_before_residual,
        "target_hidden_size": c.target_hidden,
        "eagle_aux_hidden_state_layer_ids": list(c.aux_layers),
        "speculators_config": {
            "algorithm": "eagle3",
            "proposal_methods": [{"proposal_type": "greedy",
                                  "speculative_tokens": c.speculative_tokens}],
            "default_proposal_method": "greedy",
            "verifier": {"name_or_path": verifier, "architectures": list(verifier_architectures)},
        },
    }  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    state = {}
    for key, tensor in head.state_dict().items():
        if key == "lm_head.weight" and not with_lm_head:
            continue
        state[key] = tensor.contiguous() if key == "d2t" else tensor.to(dtype).contiguous()
    t2d = torch.zeros(c.target_vocab, dtype=torch.bool)
    t2d[head.draft_to_target.cpu()] = True
    state["t2d"] = t2d
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
