"""A float32 CPU target's linear layers on a few rows through weights packed once (oneDNN).

A verification pass multiplies every weight by K+1 rows. torch's CPU BLAS (MKL) computes a
product of 2 to ~32 rows far below what the core can do: on a 2-core AMD EPYC with AVX2 only,
SmolLM2's pass over 5 tokens cost 1.92 passes over 1 (benchmarks/verify_pass.py), while the
products' arithmetic is a few milliseconds. oneDNN, which torch ships, multiplies the same
rows against a weight reordered once into its blocked layout in 0.5-0.85 of the time for the
large matrices; one row and a prefill are left to the BLAS, as fast or faster there
(benchmarks/verify_pass.py: a pass over 5 tokens 1.28x faster; docs/models.md).

The packed copy costs the layers' bytes again, so it is made only while it fits a quarter of
the memory the machine has free, and only for float32 weights on an x86-64 CPU.
$SPECVIZ_PACK_WEIGHTS=0 turns it off. Results agree with F.linear to rounding (a product's
sums in another order: the same as a product over 5 rows already differs from 5 over 1).

The packed weights live beside the modules (a weak map), not in them: state_dict, tied
weights and `.weight` readers see the plain layer; a copy of a model (copy.deepcopy) computes
plainly; so does any pass with gradients on (training); a weight changed in place or replaced
(`.to`) is noticed and multiplied plainly from then on.
"""

from __future__ import annotations

import os
import platform
import weakref

import torch
import torch.nn.functional as F

MIN_ROWS, MAX_ROWS = 2, 32  # past ~32 rows (a prefill) the BLAS is as fast or faster
BLOCKED_FOR = 16  # the batch size the layout is chosen for: any count of rows then works
MEMORY_SHARE = 0.25  # of the memory free at load
ENV_SWITCH = "SPECVIZ_PACK_WEIGHTS"

# module -> (packed weight, the weight's data_ptr and _version when packed)
_PACKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class PackedLinear(torch.nn.Linear):
    """An nn.Linear (the same instance, its class swapped as torch.nn.utils.parametrize
    does) whose products over MIN_ROWS..MAX_ROWS rows use its packed weight."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // self.in_features
        entry = _PACKED.get(self) if MIN_ROWS <= rows <= MAX_ROWS else None
        if (
            entry is None
            or x.dtype != torch.float32
            or torch.is_grad_enabled()  # the packed product has no gradient
            or entry[1] != (self.weight.data_ptr(), self.weight._version)
        ):
            return F.linear(x, self.weight, self.bias)
        return _packed_product(x, entry[0], self.bias)


def _reorder(weight: torch.Tensor) -> torch.Tensor:
    """The weight [out, in] in oneDNN's blocked layout, for any number of rows."""
    return torch.ops.mkldnn._reorder_linear_weight(weight, BLOCKED_FOR)


def _packed_product(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None):
    """x @ W^T (+ bias) with W in oneDNN's blocked layout."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def available() -> bool:
    """Whether this torch has oneDNN's packed linear on an x86-64 CPU (the only kind it was
    measured on: an ARM CPU keeps torch's own products)."""
    return (
        platform.machine().lower() in ("x86_64", "amd64")
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    )


def free_memory() -> int | None:
    """Bytes the kernel says are available (MemAvailable), or None where it does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def packable(model: torch.nn.Module) -> list[torch.nn.Linear]:
    """The model's float32 CPU linear layers (a layer whose forward was replaced on the
    instance, as core.models.pair.speed_up_head does, included: packing takes its place)."""
    return [
        m
        for m in model.modules()
        if isinstance(m, torch.nn.Linear)
        and m.weight.device.type == "cpu"
        and m.weight.dtype == torch.float32
    ]


def pack_linears(model: torch.nn.Module, budget: int | None = None) -> int:
    """Pack the model's float32 CPU linear layers; the bytes the packed copies take (0: none
    packed: oneDNN absent, switched off, nothing to pack, or over `budget`, default a
    quarter of the free memory). Undone by unpack_linears."""
    if os.environ.get(ENV_SWITCH, "").strip() == "0" or not available():
        return 0
    layers = packable(model)
    size = sum(m.weight.numel() * m.weight.element_size() for m in layers)
    if budget is None:
        free = free_memory()
        budget = int(free * MEMORY_SHARE) if free is not None else 0
    if not layers or size > budget:
        return 0
    try:
        with torch.no_grad():
            packed = [_reorder(m.weight.detach()) for m in layers]
    except RuntimeError:  # a layout this oneDNN refuses: the model stays as loaded
        return 0
    for m, weight in zip(layers, packed, strict=True):
        _PACKED[m] = (weight, (m.weight.data_ptr(), m.weight._version))
        vars(m).pop("forward", None)  # the head's W @ x^T: the packed product replaces it
        m.__class__ = PackedLinear
    return size


def unpack_linears(model: torch.nn.Module) -> int:
    """Plain nn.Linear layers again (the packed copies freed); how many were packed."""
    count = 0
    for m in model.modules():
        if type(m) is PackedLinear:
            _PACKED.pop(m, None)
            m.__class__ = torch.nn.Linear
            count += 1
    return count


def switch(model: torch.nn.Module, on: bool) -> None:
    """The model's packed layers back to plain products (on=False) or packed again, without
    repacking: a benchmark's A/B in one process (benchmarks/verify_pass.py)."""
    for m in model.modules():
        if isinstance(m, torch.nn.Linear) and m in _PACKED:
            m.__class__ = PackedLinear if on else torch.nn.Linear


def packed_bytes(model: torch.nn.Module) -> int:
    """The bytes of the model's layers that multiply few rows through a packed weight."""
    return sum(
        m.weight.numel() * m.weight.element_size()
        for m in model.modules()
        if type(m) is PackedLinear and m in _PACKED
    )
