"""What a safetensors file holds, read from its JSON header without loading a tensor."""

from __future__ import annotations

import json
import struct
from math import prod
from pathlib import Path


def safetensors_params(path: Path) -> int:
    """Number of elements stored in a safetensors file, read from its JSON header."""
    with Path(path).open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return sum(prod(t["shape"]) for k, t in header.items() if k != "__metadata__")
