"""The lab's distributions: the seeds' 4-token example, normalising an edited p or q, and
which tokens get a bar."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from specviz.core.metrics.position_bars import REST_LABEL  # the last bar: the rest

# The seeds' worked example: four tokens, the draft q and the target p.
SEED_TOKENS = ("A", "B", "C", "D")


SEED_Q = (0.2, 0.4, 0.3, 0.1)


SEED_P = (0.5, 0.1, 0.1, 0.3)


def normalise(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """values / sum(values) as float64; ValueError for negative, non-finite or all-zero."""
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    if arr.size == 0:
        raise ValueError("a distribution needs at least one entry")
    if not np.isfinite(arr).all():
        raise ValueError("probabilities must be finite numbers")
    if (arr < 0).any():
        bad = ", ".join(f"{v:g}" for v in arr[arr < 0][:3])
        raise ValueError(f"probabilities cannot be negative (got {bad})")
    total = arr.sum()
    if total <= 0:
        raise ValueError("a distribution needs some mass: all entries are zero")
    return arr / total


def set_entry(values: Sequence[float] | np.ndarray, index: int, value: float) -> np.ndarray:
    """A distribution with entry `index` set to `value` in [0, 1] and the others scaled to
    fill 1 - value in proportion (evenly when they are all zero): a slider editor's step."""
    arr = normalise(values)
    if not 0 <= value <= 1:
        raise ValueError(f"a probability must be between 0 and 1, got {value:g}")
    others = np.delete(arr, index)
    if others.size == 0:
        return np.ones(1)
    rest = others.sum()
    others = (
        others * ((1 - value) / rest)
        if rest > 0
        else np.full(others.size, (1 - value) / others.size)
    )
    return np.insert(others, index, value)


def tensor_pair(p, q) -> tuple[torch.Tensor, torch.Tensor]:
    """Two normalised float64 tensors [V] of the same length, or ValueError."""
    pn, qn = normalise(p), normalise(q)
    if pn.shape != qn.shape:
        raise ValueError(f"p and q must have the same length ({pn.size} vs {qn.size})")
    return torch.from_numpy(pn), torch.from_numpy(qn)


@dataclass(frozen=True)
class BarLayout:
    """Which entries of a long distribution get a bar: the top ones, then "everything else"."""

    ids: np.ndarray  # [n] vocabulary indices, largest first (all of them when V is small)
    labels: tuple[str, ...]  # one per bar, "everything else" last when has_rest
    has_rest: bool

    def apply(self, values: np.ndarray) -> np.ndarray:
        """Bar heights: values[ids], then the sum of the rest when has_rest."""
        values = np.asarray(values, dtype=np.float64)
        picked = values[self.ids]
        if not self.has_rest:
            return picked
        return np.append(picked, max(0.0, float(values.sum() - picked.sum())))


def bar_layout(
    order_by: np.ndarray, labels: Sequence[str] | Callable[[int], str], n: int = 20
) -> BarLayout:
    """All entries in order when there are at most n + 1, else the n largest of order_by
    and one bar for everything else. labels: a label per entry, or a function of the id."""
    order_by = np.asarray(order_by)
    size = order_by.size
    label = labels if callable(labels) else labels.__getitem__
    if size <= n + 1:
        ids = np.arange(size)
        return BarLayout(ids, tuple(label(int(i)) for i in ids), has_rest=False)
    ids = np.argsort(-order_by, kind="stable")[:n]
    return BarLayout(ids, (*(label(int(i)) for i in ids), REST_LABEL), has_rest=True)
