"""Loading a target + draft pair and its tokenizer: built-in name, local folder or hub id.

Nothing here downloads unless the user named a hub id that is not cached and the hub is
reachable; an unreachable hub is reported at once, never waited on.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import pickle
import socket
from dataclasses import dataclass, field
from pathlib import Path

import torch

from specviz.core.models.generation import generation_defaults
from specviz.core.models.load_options import LoadOptions
from specviz.core.models.packed_linear import ENV_SWITCH, MAX_ROWS, MIN_ROWS, pack_linears
from specviz.core.models.sanity import check_model
from specviz.core.models.smollm2 import Progress
from specviz.core.models.tensor_parallel import tp_load_kwargs
from specviz.core.models.vocab_bridge import BRIDGES, same_vocabulary
from specviz.core.trace.records import ModelInfo

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
HUB_HOST = ("huggingface.co", 443)


class ModelLoadError(Exception):
    """A model pair that cannot be loaded; the message says what to do."""


@dataclass
class ModelPair:
    """A loaded target and draft that share one tokenizer and one vocabulary. The draft is
    None when only the target was loaded (drafters without a model: lookup, early exit)."""

    target: torch.nn.Module
    draft: torch.nn.Module | None
    tokenizer: object  # a transformers PreTrainedTokenizerBase
    target_info: ModelInfo
    draft_info: ModelInfo | None
    vocab_size: int  # logits are cut to this many columns for both models
    device: torch.device  # the target's input device: where p, q and verify() live
    draft_device: torch.device | None = None  # None: the same as device
    # The target's generation_config.json: the fields it sets that differ from
    # transformers' defaults ({} when it has none).
    generation_config: dict = field(default_factory=dict)
    # How --dtype auto chose the dtype (core.models.dtype_probe.choose_dtype); None otherwise.
    dtype_choice: dict | None = None
    # The draft's own tokenizer when it differs from the target's (LoadOptions.vocab_bridge);
    # None: the draft reads and writes the target's ids (`tokenizer`).
    draft_tokenizer: object | None = None

    @property
    def eos_token_id(self) -> int | None:
        return self.tokenizer.eos_token_id

    def token_text(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id], clean_up_tokenization_spaces=False)


def resolve_device(device: str, progress: Progress | None = None) -> torch.device:
    """The torch device a name stands for, or ModelLoadError when it is not usable here."""
    name = device.strip().lower() if isinstance(device, str) else ""
    if name == "auto":
        if progress:
            progress("--device auto is deprecated (it picks cuda when torch sees a GPU, else "
                     "cpu); use --device cuda, or --device-map auto to spread the target as "
                     "transformers does")  # fmt: skip
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, ValueError):
        raise ModelLoadError(
            f"unknown device {device!r}: use cpu, cuda, cuda:N (N a GPU number) or mps"
        ) from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(
                f"device '{device}' was asked for, but torch sees no CUDA GPU "
                f"(torch {torch.__version__}); use --device cpu"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ModelLoadError(
                f"device '{device}': torch sees {torch.cuda.device_count()} GPU(s), "
                f"numbered 0 to {torch.cuda.device_count() - 1}"
            )
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise ModelLoadError(f"device '{device}' was asked for, but MPS is not available here")
    elif dev.type not in ("cpu", "cuda", "mps", "xpu"):
        raise ModelLoadError(f"unknown device {device!r}: use cpu, cuda, cuda:N or mps")
    return dev


def _looks_like_path(spec: str) -> bool:
    """An existing path, or one that cannot be a hub id ("name" or "org/name")."""
    if Path(spec).expanduser().exists():
        return True
    return (
        spec.startswith((".", "/", "~")) or spec.count("/") > 1 or os.sep != "/" and os.sep in spec
    )


def _hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    try:
        with socket.create_connection(HUB_HOST, timeout=timeout):
            return True
    except OSError:
        return False


def resolve_spec(spec: str, role: str, progress: Progress | None = None) -> tuple[str, bool]:
    """Where to load `spec` from: (folder or hub id, is_local). role is "target" or "draft"."""
    spec = spec.strip()
    if not spec:
        raise ModelLoadError(f"no {role} model given")
    if spec.startswith("builtin:"):
        from specviz.core.models.builtin import BuiltinError, get_pair

        try:
            target_dir, draft_dir = get_pair(spec).resolve(progress)
        except BuiltinError as e:
            raise ModelLoadError(str(e)) from None
        return str(target_dir if role == "target" else draft_dir), True
    if _looks_like_path(spec):
        folder = Path(spec).expanduser()
        if not folder.exists():
            raise ModelLoadError(f"{role} model folder '{spec}' does not exist")
        if not folder.is_dir() or not (folder / "config.json").is_file():
            raise ModelLoadError(
                f"{role} model '{spec}' is not a model folder (no config.json; "
                "expected a folder written by save_pretrained)"
            )
        return str(folder), True
    return spec, False


def _remote_code(source: str, local: bool) -> str | None:
    """What a local model's config.json maps to code in its folder (auto_map), if anything."""
    if not local:
        return None  # the hub's config is checked by transformers, reworded below
    try:
        config = json.loads((Path(source) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # transformers names the fault
    auto_map = config.get("auto_map") if isinstance(config, dict) else None
    return ", ".join(sorted(map(str, auto_map.values())))[:200] if auto_map else None


def _load_error(e: BaseException, role: str, spec: str, trusted: bool) -> ModelLoadError:
    """A from_pretrained failure in words: which model, what is wrong, what to do."""
    text = str(e).strip()
    first = text.splitlines()[0] if text else type(e).__name__
    if "Unrecognized configuration class" in text or "does not recognize" in text:
        return ModelLoadError(f"{role} model '{spec}' is not a causal language model ({first})")
    if "trust_remote_code" in text and not trusted:
        return ModelLoadError(
            f"{role} model '{spec}' needs code from its repository to load "
            "(trust_remote_code); pass --trust-remote-code only if you trust that code"
        )
    if isinstance(e, pickle.UnpicklingError) or "Weights only load failed" in text:
        return ModelLoadError(
            f"{role} model '{spec}': its pytorch_model.bin holds Python objects besides "
            "tensors (a pickle that could run code), so it was not loaded; specviz reads "
            "tensors only. Use a copy in safetensors format."
        )
    if type(e).__name__ == "SafetensorError" or "safetensors" in text.lower():
        return ModelLoadError(
            f"{role} model '{spec}': its safetensors weights are damaged or not safetensors "
            f"({first}); download or save the model again"
        )
    return ModelLoadError(f"{role} model '{spec}' could not be loaded: {type(e).__name__}: {first}")


# What a damaged or hostile folder raises besides OSError: ValueError, SafetensorError, pickle's
# UnpicklingError, RuntimeError (wrong shapes), KeyError / TypeError (a damaged config).
_LOAD_FAILURES = (ValueError, RuntimeError, KeyError, TypeError, pickle.UnpicklingError)


def _from_pretrained(loader, source: str, local: bool, role: str, spec: str, **kwargs):
    """Call a transformers from_pretrained; cached hub ids load without any network."""
    trusted = bool(kwargs.get("trust_remote_code"))
    code = _remote_code(source, local)
    if code and not trusted:
        raise ModelLoadError(
            f"{role} model '{spec}' needs code from its folder to load (its config.json maps "
            f"to {code}); pass --trust-remote-code only if you trust that code"
        )
    try:
        return loader.from_pretrained(source, local_files_only=True, **kwargs)
    except OSError as e:
        if local:
            raise _load_error(e, role, spec, trusted) from None
    except ModelLoadError:
        raise
    except Exception as e:  # noqa: BLE001 - any fault of the files is the user's to fix
        raise _load_error(e, role, spec, trusted) from None
    if not _hub_reachable():
        raise ModelLoadError(
            f"{role} model '{spec}' is not in the local Hugging Face cache and the hub "
            f"({HUB_HOST[0]}) cannot be reached from here. Download it on a machine with "
            "internet access (or set HF_HOME to a cache that has it), or pass a local folder."
        )
    try:
        return loader.from_pretrained(source, **kwargs)
    except Exception as e:  # noqa: BLE001
        raise _load_error(e, role, spec, trusted) from None


def _placement(model: torch.nn.Module, mapped: bool) -> str:
    """Where a model's weights are: one device, or the devices of its device map
    ("map: cuda:0, cuda:1, cpu"; "map: cpu" when accelerate put all of it on one)."""
    devices = []
    for d in (getattr(model, "hf_device_map", None) or {}).values():
        name = f"cuda:{d}" if isinstance(d, int) else str(d)
        if name not in devices:
            devices.append(name)
    first = str(next(model.parameters()).device)
    return f"map: {', '.join(devices or [first])}" if mapped else first


def load_model(
    spec: str,
    source: str,
    local: bool,
    role: str,
    device: torch.device | None,
    options: LoadOptions | str = LoadOptions(),
    progress: Progress | None = None,
) -> tuple[torch.nn.Module, ModelInfo]:
    """Load one model from where resolve_spec(spec) said it lives. device None: the target
    placed by options.device_map (through accelerate); options.tp_size > 1: split."""
    from transformers import AutoModelForCausalLM

    if isinstance(options, str):  # the old signature: a dtype name
        options = LoadOptions(dtype=options)
    kwargs = {
        "dtype": "auto" if options.dtype == "config" else DTYPES[options.dtype],
        "weights_only": True,  # a pickled checkpoint is read as tensors only, never run
        "trust_remote_code": options.trust_remote_code,
    }
    if options.attn_implementation:
        kwargs["attn_implementation"] = options.attn_implementation
    revision = options.revision if role == "target" else options.draft_revision
    if revision:
        kwargs["revision"] = revision
    if device is None:
        kwargs["device_map"] = options.device_map
    tp = role == "target" and options.tp_size > 1
    if tp:
        kwargs.update(tp_load_kwargs(source, local, options.tp_size, spec))
    if progress:
        where = f"device map {options.device_map}" if device is None else str(device)
        progress(f"loading {role} {spec} ({options.dtype}, {where})")
    model = _from_pretrained(AutoModelForCausalLM, source, local, role, spec, **kwargs)
    if device is not None and not tp:  # a split target is where its plan put each shard
        model.to(device)
    model.eval()
    check_model(model, role, spec, ModelLoadError)  # a causal LM with finite weights
    if device is not None and not tp:  # not under accelerate's hooks, nor on a split model
        packed = pack_linears(model) if options.pack_weights else 0  # float32, few-row products
        if not packed:
            speed_up_head(model)
        elif progress:
            progress(f"{role}: float32 weights packed for passes of {MIN_ROWS}-{MAX_ROWS} "
                     f"tokens ({packed / 2**20:.0f} MiB more; ${ENV_SWITCH}=0: off)")  # fmt: skip
    info = ModelInfo(
        name=spec,
        path=str(Path(source).resolve()) if local else source,
        vocab_size=int(model.get_output_embeddings().weight.shape[0]),
        params=sum(p.numel() for p in model.parameters()),
        dtype=str(model.dtype).removeprefix("torch."),
        device=_placement(model, mapped=device is None),
    )
    return model, info


# Output heads at least this large (vocabulary x width) get the product below on CPU.
LARGE_HEAD = 1 << 22


def speed_up_head(model: torch.nn.Module) -> bool:
    """Compute the LM head as W @ x^T on CPU when the head is large: F.linear on a few rows
    (a verification's K+1) repacks the whole weight on every call with CPU BLAS (SmolLM2's
    49152 x 576 head: 3 rows 48 ms, one 13 ms; W @ x^T 9-11 ms for 1-5 rows,
    benchmarks/head_matmul.py). Same product; only the kernel differs. Whether applied."""
    head = model.get_output_embeddings()
    if (
        not isinstance(head, torch.nn.Linear)
        or head.weight.device.type != "cpu"
        or head.weight.numel() < LARGE_HEAD
    ):
        return False
    weight, bias = head.weight, head.bias

    def forward(x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])  # [N, H]
        out = (weight @ flat.T).T  # [N, V], without repacking weight
        if bias is not None:
            out = out + bias
        return out.reshape(*x.shape[:-1], weight.shape[0])

    head.forward = forward
    return True


def load_tokenizer(source: str, local: bool, role: str, spec: str, **kwargs):
    from transformers import AutoTokenizer

    return _from_pretrained(AutoTokenizer, source, local, role, spec, **kwargs)


def check_same_tokenizer(target_tok, draft_tok, target_name: str, draft_name: str) -> None:
    """Refuse a pair whose tokenizers map text to different ids."""
    why = same_vocabulary(target_tok, draft_tok)
    if why:
        raise ModelLoadError(
            f"target '{target_name}' and draft '{draft_name}' have different tokenizers: "
            f"{why}. Speculative decoding needs a draft that shares the target's vocabulary, "
            "or a bridge: --vocab-bridge tli (the tokens both share) or string (the draft's text "
            "re-tokenized), both lossless."
        )


def _check_options(options: LoadOptions, t_local: bool, d_local: bool) -> None:
    if options.dtype not in ("auto", "config", *DTYPES):
        raise ModelLoadError(
            f"unknown dtype '{options.dtype}' (auto, config or one of {', '.join(DTYPES)})"
        )
    for revision, local, what in (
        (options.revision, t_local, "--revision (the target)"),
        (options.draft_revision, d_local, "--draft-revision"),
    ):
        if revision and local:
            raise ModelLoadError(f"{what} applies to a hub id, not to a local folder")
    if options.vocab_bridge not in (None, *BRIDGES):
        raise ModelLoadError(
            f"unknown vocabulary bridge {options.vocab_bridge!r} (one of {', '.join(BRIDGES)})"
        )
    if options.device_map is not None and importlib.util.find_spec("accelerate") is None:
        raise ModelLoadError(
            "--device-map needs the accelerate package, which is not installed: "
            "pip install accelerate==1.15.0"
        )


def input_device(model: torch.nn.Module) -> torch.device:
    """Where a model takes its input ids: its input embeddings' device."""
    return model.get_input_embeddings().weight.device


def load_pair(
    target: str,
    draft: str | None,
    options: LoadOptions | None = None,
    progress: Progress | None = None,
    **fields,
) -> ModelPair:
    """Load both models and the shared tokenizer, or raise ModelLoadError.

    options: a LoadOptions, or its fields as keywords (`device="cuda", dtype="bfloat16"`).
    draft None: the target alone (for a drafter that needs no draft model).
    """
    if options is None:
        try:
            options = LoadOptions(**fields)
        except TypeError as e:
            raise ModelLoadError(f"load_pair: {e}") from None
    elif fields:
        options = dataclasses.replace(options, **fields)
    if options.dtype == "auto":  # measured here (core.models.dtype_probe): loaded as float32
        from specviz.core.models.dtype_probe import apply_auto_dtype

        pair = load_pair(target, draft, dataclasses.replace(options, dtype="float32"), progress)
        split = options.device_map is not None or options.tp_size > 1
        return apply_auto_dtype(pair, options.dtype_k, split, progress, speed_up_head)
    # Checked before anything loads.
    dev = None if options.device_map is not None else resolve_device(options.device, progress)
    draft_dev = resolve_device(options.draft_device) if options.draft_device else None
    # Resolved once: a built-in pair's resolve() may check or convert a cache folder.
    t_source, t_local = resolve_spec(target, "target", progress)
    if draft is None:
        return _load_target_alone(target, t_source, t_local, dev, options, progress)
    d_source, d_local = resolve_spec(draft, "draft", progress)
    _check_options(options, t_local, d_local)
    trust = {"trust_remote_code": options.trust_remote_code}
    t_tok = load_tokenizer(t_source, t_local, "target", target, revision=options.revision, **trust)
    d_tok = load_tokenizer(
        d_source, d_local, "draft", draft, revision=options.draft_revision, **trust
    )
    bridged = options.vocab_bridge is not None and same_vocabulary(t_tok, d_tok) is not None
    if not bridged:
        check_same_tokenizer(t_tok, d_tok, target, draft)
    t_model, t_info = load_model(target, t_source, t_local, "target", dev, options, progress)
    t_dev = input_device(t_model)
    draft_dev = draft_dev or t_dev
    d_model, d_info = load_model(draft, d_source, d_local, "draft", draft_dev, options, progress)
    # A bridged draft's logits are its own vocabulary's; p and q live in the target's.
    vocab = t_info.vocab_size if bridged else min(t_info.vocab_size, d_info.vocab_size)
    if len(t_tok) > vocab:
        raise ModelLoadError(
            f"the tokenizer has {len(t_tok)} tokens but '{target}' / '{draft}' score only {vocab}"
        )
    return ModelPair(
        t_model,
        d_model,
        t_tok,
        t_info,
        d_info,
        vocab,
        t_dev,
        draft_dev,
        generation_defaults(t_model),
        draft_tokenizer=d_tok if bridged else None,
    )


def _load_target_alone(target, t_source, t_local, dev, options, progress) -> ModelPair:
    _check_options(options, t_local, False)
    trust = {"trust_remote_code": options.trust_remote_code}
    t_tok = load_tokenizer(t_source, t_local, "target", target, revision=options.revision, **trust)
    t_model, t_info = load_model(target, t_source, t_local, "target", dev, options, progress)
    return ModelPair(
        t_model, None, t_tok, t_info, None, t_info.vocab_size, input_device(t_model), None,
        generation_defaults(t_model),
    )  # fmt: skip
