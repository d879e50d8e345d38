"""What a link's model load gives back (gui.session.local_link, remote_link), apart from the
worker that relays it, so that a link needs no import of the worker."""

from __future__ import annotations

from dataclasses import dataclass

from specviz.core.trace.records import ModelInfo


@dataclass(frozen=True)
class Loaded:
    """What `loaded` carries: the pair as asked for and as loaded (draft_spec "" and draft
    None: the target alone, for a drafter that needs no draft model)."""

    target_spec: str
    draft_spec: str
    target: ModelInfo
    draft: ModelInfo | None
    device: str
    vocab_size: int
    instruct: str | None = None  # why the target chats by default (core.models.chat), or None


class Cancelled(Exception):
    """Raised inside a model load when the window is closing."""
