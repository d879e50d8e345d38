"""The seeds' arithmetic for one position: min(p, q), alpha, the residual, and that
min(p, q) + (1 - alpha) * residual = p, token by token."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from specviz.core.decoding.verify import acceptance_mass, residual_distribution
from specviz.core.lab.distributions import BarLayout, tensor_pair


@dataclass(frozen=True)
class Arithmetic:
    """The seeds' step-by-step arithmetic at one position, per token. Arrays are [V]."""

    p: np.ndarray  # target
    q: np.ndarray  # draft
    overlap: np.ndarray  # min(p, q) = q * min(1, p/q): the acceptance path's mass
    excess: np.ndarray  # max(0, p - q): what the acceptance path leaves uncovered
    alpha: float  # sum min(p, q): the probability that a draft is accepted
    residual: np.ndarray  # norm(max(0, p - q)): where a rejection resamples from
    reject_path: np.ndarray  # (1 - alpha) * residual: the rejection path's mass
    total: np.ndarray  # overlap + reject_path: equal to p, token by token

    @property
    def reject(self) -> float:
        """1 - alpha: the probability of a rejection."""
        return 1.0 - self.alpha

    @property
    def matches_p(self) -> np.ndarray:
        """[V] bool: the two paths add up to p (to float precision) for each token."""
        return np.abs(self.total - self.p) <= 1e-12

    def rows(self, layout: BarLayout) -> tuple[ArithmeticRow, ...]:
        """The arithmetic table for the bars of a layout, "everything else" summed."""
        cols = [
            layout.apply(v)
            for v in (self.p, self.q, self.overlap, self.excess, self.residual, self.reject_path)
        ]
        cols.append(layout.apply(self.total))
        ok = self.matches_p
        checks = [bool(ok[i]) for i in layout.ids]
        if layout.has_rest:
            rest = np.ones(ok.size, dtype=bool)
            rest[layout.ids] = False
            checks.append(bool(ok[rest].all()))
        return tuple(
            ArithmeticRow(label, *(float(c[i]) for c in cols), checks[i])
            for i, label in enumerate(layout.labels)
        )


@dataclass(frozen=True)
class ArithmeticRow:
    """One line of the seeds' table: a token (or "everything else") and its masses."""

    label: str
    p: float
    q: float
    overlap: float  # min(p, q): acceptance path
    excess: float  # max(0, p - q)
    residual: float  # norm(max(0, p - q))
    reject_path: float  # (1 - alpha) * residual
    total: float  # overlap + reject_path
    matches_p: bool  # total == p, token by token


def arithmetic(p: Sequence[float] | np.ndarray, q: Sequence[float] | np.ndarray) -> Arithmetic:
    tp, tq = tensor_pair(p, q)
    alpha = float(acceptance_mass(tp, tq))
    residual = residual_distribution(tp, tq)  # [V] float64
    overlap = torch.minimum(tp, tq)
    reject_path = (1 - alpha) * residual
    return Arithmetic(
        p=tp.numpy(),
        q=tq.numpy(),
        overlap=overlap.numpy(),
        excess=(tp - tq).clamp_min(0).numpy(),
        alpha=alpha,
        residual=residual.numpy(),
        reject_path=reject_path.numpy(),
        total=(overlap + reject_path).numpy(),
    )
