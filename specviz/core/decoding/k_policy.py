"""Policies for K: how many tokens a round drafts, decided from what the draft has seen.

- constant: K every round (Settings.k).
- heuristic: transformers' `num_assistant_tokens_schedule="heuristic"`: start at K; +2
  after a round whose drafts were all accepted, -1 otherwise, never below 1.
- threshold: transformers' `assistant_confidence_threshold`: up to K, but drafting stops
  after a token whose probability under the draft is below the threshold.

Any policy keeps the output exact: whether position i is drafted depends only on the
drafts before it, and every position, drafted or not, emits a token that follows p.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

POLICIES = ("constant", "heuristic", "threshold")
MAX_K = 32  # the largest K Settings allows; the heuristic never grows past it


@dataclass(frozen=True)
class PolicyConfig:
    """Which policy chooses K, and its parameter."""

    kind: str = "constant"  # one of POLICIES
    # threshold: stop drafting after a token the draft gave less than this (transformers'
    # default assistant_confidence_threshold is 0.4)
    threshold: float = 0.4

    def validate(self) -> None:
        if self.kind not in POLICIES:
            raise ValueError(f"unknown policy '{self.kind}' (one of {', '.join(POLICIES)})")
        if self.kind == "threshold" and not 0 <= self.threshold <= 1:
            raise ValueError(f"the threshold must be between 0 and 1, got {self.threshold}")

    def to_json(self) -> dict[str, Any]:
        """The trace header's `policy` field."""
        if self.kind == "threshold":
            return {"kind": self.kind, "threshold": self.threshold}
        return {"kind": self.kind}


class Policy:
    """The K of each round for one session. Not thread-safe: the engine's owner only."""

    def __init__(self, config: PolicyConfig, k: int):
        config.validate()
        self.config = config
        self.reset(k)

    def reset(self, k: int) -> None:
        """Start again from K = k (a new session, or the user changed K)."""
        self.base_k = k
        self.k = k

    @property
    def uses_confidence(self) -> bool:
        """Whether drafters must report the probability of each proposal (threshold)."""
        return self.config.kind == "threshold"

    def next_k(self) -> int:
        """K for the next round (before the engine's length limits)."""
        return self.k

    def keep_drafting(self, confidence: float) -> bool:
        """After a drafted token the draft gave probability `confidence`: draft another?"""
        return not self.uses_confidence or confidence >= self.config.threshold

    def update(self, n_drafted: int, n_accepted: int) -> None:
        """After a round: the heuristic grows K when every draft was kept (transformers
        compares its matches with the number of candidates), else shrinks it."""
        if self.config.kind != "heuristic":
            return
        if n_drafted > 0 and n_accepted == n_drafted:
            self.k = min(self.k + 2, MAX_K)
        else:
            self.k = max(1, self.k - 1)
