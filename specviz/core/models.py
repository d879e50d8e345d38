"""Loading a target + draft pair and its tokenizer: built-in name, local folder or hub id.

Nothing here downloads unless the user named a hub id that is not cached and the hub is
reachable; an unreachable hub is reported at once, never waited on.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from .trace import ModelInfo

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
HUB_HOST = ("huggingface.co", 443)
Progress = Callable[[str], None]


class ModelLoadError(Exception):
    """A model pair that cannot be loaded; the message says what to do."""


@dataclass
class ModelPair:
    """A loaded target and draft that share one tokenizer and one vocabulary."""

    target: torch.nn.Module
    draft: torch.nn.Module
    tokenizer: object  # a transformers PreTrainedTokenizerBase
    target_info: ModelInfo
    draft_info: ModelInfo
    vocab_size: int  # logits are cut to this many columns for both models
    device: torch.device

    @property
    def eos_token_id(self) -> int | None:
        return self.tokenizer.eos_token_id

    def token_text(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id], clean_up_tokenization_spaces=False)


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError(
            f"device '{device}' was asked for, but torch sees no CUDA GPU "
            f"(torch {torch.__version__}); use --device cpu"
        )
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
        from .builtin import BuiltinError, get_pair

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


def _from_pretrained(loader, source: str, local: bool, role: str, spec: str, **kwargs):
    """Call a transformers from_pretrained; cached hub ids load without any network."""
    try:
        return loader.from_pretrained(source, local_files_only=True, **kwargs)
    except ValueError as e:
        if "Unrecognized configuration class" in str(e) or "does not recognize" in str(e):
            raise ModelLoadError(
                f"{role} model '{spec}' is not a causal language model ({str(e).splitlines()[0]})"
            ) from None
        raise ModelLoadError(f"{role} model '{spec}' could not be loaded: {e}") from None
    except OSError as e:
        if local:
            raise ModelLoadError(f"{role} model '{spec}' could not be loaded: {e}") from None
    if not _hub_reachable():
        raise ModelLoadError(
            f"{role} model '{spec}' is not in the local Hugging Face cache and the hub "
            f"({HUB_HOST[0]}) cannot be reached from here. Download it on a machine with "
            "internet access (or set HF_HOME to a cache that has it), or pass a local folder."
        )
    try:
        return loader.from_pretrained(source, **kwargs)
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"{role} model '{spec}' could not be loaded: {e}") from None


def load_model(
    spec: str,
    source: str,
    local: bool,
    role: str,
    device: torch.device,
    dtype: str,
    progress: Progress | None = None,
) -> tuple[torch.nn.Module, ModelInfo]:
    """Load one model from where resolve_spec(spec) said it lives."""
    from transformers import AutoModelForCausalLM

    if progress:
        progress(f"loading {role} {spec} ({dtype}, {device})")
    model = _from_pretrained(AutoModelForCausalLM, source, local, role, spec, dtype=DTYPES[dtype])
    model.to(device).eval()
    speed_up_head(model)
    info = ModelInfo(
        name=spec,
        path=str(Path(source).resolve()) if local else source,
        vocab_size=int(model.get_output_embeddings().weight.shape[0]),
        params=sum(p.numel() for p in model.parameters()),
        dtype=dtype,
        device=str(device),
    )
    return model, info


# Output heads at least this large (vocabulary x width) get the product below on CPU.
LARGE_HEAD = 1 << 22


def speed_up_head(model: torch.nn.Module) -> bool:
    """Compute the LM head as W @ x^T on CPU when the head is large.

    F.linear on a few rows (the K+1 positions of a verification) repacks the whole weight
    on every call with CPU BLAS: for SmolLM2's 49152 x 576 head, 3 rows took 48 ms against
    13 ms for one; W @ x^T takes 9-11 ms for 1-5 rows (benchmarks/head_matmul.py). Same
    product, same model; only the kernel differs. Returns whether it was applied.
    """
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


def load_tokenizer(source: str, local: bool, role: str, spec: str):
    from transformers import AutoTokenizer

    return _from_pretrained(AutoTokenizer, source, local, role, spec)


def check_same_tokenizer(target_tok, draft_tok, target_name: str, draft_name: str) -> None:
    """Refuse a pair whose tokenizers map text to different ids."""
    t_vocab, d_vocab = target_tok.get_vocab(), draft_tok.get_vocab()
    if len(t_vocab) != len(d_vocab):
        raise ModelLoadError(
            f"target '{target_name}' and draft '{draft_name}' have different tokenizers: "
            f"{len(t_vocab)} vs {len(d_vocab)} tokens. Speculative decoding needs a draft "
            "that shares the target's vocabulary."
        )
    if t_vocab != d_vocab:
        differing = sorted(tok for tok in t_vocab if d_vocab.get(tok) != t_vocab[tok])[:3]
        raise ModelLoadError(
            f"target '{target_name}' and draft '{draft_name}' have different tokenizers: "
            f"the same size ({len(t_vocab)}) but different token ids (e.g. {differing!r}). "
            "Speculative decoding needs a draft that shares the target's vocabulary."
        )


def load_pair(
    target: str,
    draft: str,
    device: str = "cpu",
    dtype: str = "float32",
    progress: Progress | None = None,
) -> ModelPair:
    """Load both models and the shared tokenizer, or raise ModelLoadError."""
    if dtype not in DTYPES:
        raise ModelLoadError(f"unknown dtype '{dtype}' (one of {', '.join(DTYPES)})")
    dev = resolve_device(device)
    # Resolved once: a built-in pair's resolve() may check or convert a cache folder.
    t_source, t_local = resolve_spec(target, "target", progress)
    d_source, d_local = resolve_spec(draft, "draft", progress)
    t_tok = load_tokenizer(t_source, t_local, "target", target)
    d_tok = load_tokenizer(d_source, d_local, "draft", draft)
    check_same_tokenizer(t_tok, d_tok, target, draft)
    t_model, t_info = load_model(target, t_source, t_local, "target", dev, dtype, progress)
    d_model, d_info = load_model(draft, d_source, d_local, "draft", dev, dtype, progress)
    vocab = min(t_info.vocab_size, d_info.vocab_size)
    if len(t_tok) > vocab:
        raise ModelLoadError(
            f"the tokenizer has {len(t_tok)} tokens but '{target}' / '{draft}' score only {vocab}"
        )
    return ModelPair(t_model, d_model, t_tok, t_info, d_info, vocab, dev)
