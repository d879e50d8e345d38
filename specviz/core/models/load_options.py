"""How a pair is loaded, as a plain record (no torch): the window builds one before any
model is loaded, core.models.pair loads by it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LoadOptions:
    """How to load a pair, as transformers' from_pretrained takes it (cli.options builds
    one from the command line: --device, --device-map, --draft-device, ...)."""

    device: str = "cpu"  # both models, unless device_map / draft_device say otherwise
    # float32, bfloat16, float16; "config": as stored in each model's config; "auto": the
    # faster of float32 and bfloat16 on this machine for K dtype_k (core.models.dtype_probe).
    dtype: str = "float32"
    dtype_k: int = 4
    # accelerate's placement of the target: "auto", "balanced", ... or {module: device}.
    device_map: str | dict | None = None
    draft_device: str | None = None  # None: the target's input device
    attn_implementation: str | None = None  # None: transformers' default
    revision: str | None = None  # of a hub target
    draft_revision: str | None = None  # of a hub draft
    trust_remote_code: bool = False  # run Python code shipped in a model's repository
    tp_size: int = 1  # the target split over this many torchrun ranks (tensor_parallel.py)
    # A draft whose tokenizer differs: None refuses it; "tli" keeps its own tokenizer and
    # drafts the tokens both vocabularies share (core.models.vocab_bridge, drafters.bridge.tli).
    vocab_bridge: str | None = None
    # float32 CPU weights packed for passes of a few tokens (core.models.packed_linear); off
    # for a model that only runs prefills (train-head's teacher), where it cost memory only.
    pack_weights: bool = True
