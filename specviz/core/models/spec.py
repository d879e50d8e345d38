"""PairSpec: what to load, as one value (the command line, the window, Tune and serve)."""

from __future__ import annotations

from dataclasses import dataclass, field

from specviz.core.models.pair import LoadOptions, ModelPair, Progress, load_pair


@dataclass(frozen=True)
class PairSpec:
    """A target and a draft (None: the target alone, for a drafter that needs no draft
    model), each a builtin:NAME, a local folder or a hub id, and how to load them."""

    target: str
    draft: str | None = None
    options: LoadOptions = field(default_factory=LoadOptions)

    def load(self, progress: Progress | None = None) -> ModelPair:
        """Both models and the shared tokenizer, or core.models.pair.ModelLoadError."""
        return load_pair(self.target, self.draft, self.options, progress=progress)
