"""The one state of a session's life (SessionController.state)."""

from __future__ import annotations

from enum import Enum


class State(str, Enum):
    """Where the session is; the one source of what the actions may do."""

    NO_MODELS = "no models"
    LOADING = "loading"  # a model pair is loading on the worker
    STARTING = "starting"  # reading the prompt, measuring step costs (then one Step)
    READY = "ready"  # models loaded, no rounds yet
    PAUSED = "paused"  # rounds so far; Step or Run goes on
    RUNNING = "running"  # asking for the next round whenever the last one arrived
    FINISHED = "finished"  # max new tokens, end-of-text or context length: see finish_reason
    ERROR = "error"  # the engine lost its session: the next Step starts a new one
    REPLAY = "replay"  # a loaded trace, no models needed
    REPLAYING = "replaying"  # Run in a replay
    CLOSED = "closed"

    @property
    def live(self) -> bool:
        return self not in (State.REPLAY, State.REPLAYING)
