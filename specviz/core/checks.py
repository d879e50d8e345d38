"""Checks of settings shared by the records and the sampling code (imports nothing)."""

from __future__ import annotations


def check_sampling(temperature: float, top_k: int, top_p: float) -> None:
    """Raise ValueError for sampling settings no warp can use."""
    if not 0 <= temperature < float("inf"):
        raise ValueError(f"temperature must be >= 0 and finite (0 = greedy), got {temperature}")
    if top_k < 0:
        raise ValueError(f"top-k must be >= 0 (0 = off), got {top_k}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top-p must be in (0, 1], got {top_p}")
