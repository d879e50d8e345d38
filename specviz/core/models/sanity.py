"""Checks of a loaded model before anything runs on it: a causal language model (a masked
LM such as BERT loads through AutoModelForCausalLM as an LM head and gives meaningless
figures), with finite weights (NaN or inf weights end in an index error deep in sampling)."""

from __future__ import annotations

import torch

# Architecture names (config.json's "architectures") that generate text left to right.
CAUSAL = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")


def check_model(model: torch.nn.Module, role: str, spec: str, error: type[Exception]) -> None:
    """Raise `error` (the loader's ModelLoadError) naming what is wrong."""
    config = model.config
    names = list(getattr(config, "architectures", None) or ())
    if names and not any(n.endswith(CAUSAL) for n in names):
        raise error(
            f"{role} {spec}: {', '.join(names)} is not a causal language model (its config "
            "says so): speculative decoding needs one that generates left to right"
        )
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            if tensor.is_floating_point() and tensor.device.type != "meta":
                if not bool(torch.isfinite(tensor).all()):
                    raise error(
                        f"{role} {spec}: its weights hold NaN or infinite values ({name}); "
                        "the checkpoint is damaged or was saved from a diverged training"
                    )
