"""Edits of a transformers KV cache after a round: keep a prefix (crop).

transformers 5.24's `Cache.crop(n)` takes a NEGATIVE n, the number of positions to remove;
these helpers take the length to keep, which is what the engine knows.
"""

from __future__ import annotations

from transformers import DynamicCache


def crop_to(cache: DynamicCache, length: int) -> None:
    """Drop cached positions beyond `length` (transformers 5: crop takes minus a count)."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)


def crop_layers(cache: DynamicCache, n_layers: int, length: int) -> None:
    """Crop the first n_layers of a cache back to `length` positions (early exit's layers)."""
    for layer in cache.layers[:n_layers]:
        extra = layer.get_seq_length() - length
        if extra > 0:
            layer.crop(-extra)
