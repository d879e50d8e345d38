"""The engine worker's link to a pair loaded in this process: core.host.session_host.SessionHost
on the worker's thread (gui.session.worker.EngineWorker drives it)."""

from __future__ import annotations

import dataclasses

from specviz.core.host.session_host import SessionHost
from specviz.core.models.chat import pair_instruct_reason
from specviz.core.models.pair import ModelLoadError
from specviz.core.models.spec import PairSpec
from specviz.gui.session.loaded import Cancelled, Loaded


class LocalLink:
    """The pair in this process; only the worker's thread touches it."""

    THREAD_NAME = "specviz-engine"
    SHUTDOWN_MS = 60_000
    address = None
    streams = False  # rounds are made one at a time, as the window asks
    watches = False  # nothing to lose
    CANCELLED = (Cancelled,)
    LOST: tuple = ()
    PLAIN = (ValueError,)  # errors whose text is for the user as it is
    not_ready = ("No models loaded", "Load a model pair first (Models box, Load), or open a trace.")

    def __init__(self):
        self.engine: SessionHost | None = None
        self.resume_next = None  # (a link that can lose nothing resumes nothing)
        self._drafting: tuple | None = None

    @property
    def pair(self):
        return None if self.engine is None else self.engine.pair

    @pair.setter
    def pair(self, pair) -> None:
        self.engine = SessionHost(pair, self._drafting)

    @property
    def session(self):
        """The session's core.engine.speculative.SpeculativeEngine, or None."""
        return None if self.engine is None else self.engine.session

    @session.setter
    def session(self, engine) -> None:
        self.engine.session = engine

    @property
    def drafting(self) -> tuple | None:
        return self._drafting

    @drafting.setter
    def drafting(self, drafting: tuple) -> None:
        """The next session's (and the lab's positions before one) drafter and policy."""
        self._drafting = drafting
        if self.engine is not None:
            self.engine.drafting = drafting

    def open(self, target: str, draft: str, device: str, dtype: str, worker):
        """Load the pair (replacing the current one and its session): (Loaded, False, None),
        or None once a failure is reported."""
        worker.busy.emit(f"loading {target} + {draft}" if draft else f"loading {target}")
        options = dataclasses.replace(worker.load_options, device=device, dtype=dtype)
        try:
            pair = PairSpec(target, draft or None, options).load(worker.progress)
        except Cancelled:
            return None
        except ModelLoadError as e:
            worker.error.emit(
                "Could not load the models",
                f"{e}\n\nPick another pair in the Models box (or a folder / hub id) and "
                "press Load. A saved trace can still be opened without models (File > Open).",
            )
            return None
        except Exception as e:  # anything from transformers / torch
            worker.error.emit(
                "Could not load the models",
                f"{type(e).__name__}: {e}\n\nCheck that the target and the draft are causal "
                "language models with the same tokenizer, then press Load again.",
            )
            return None
        finally:
            worker.busy.emit("")
        self.pair = pair
        info = Loaded(
            target,
            draft if pair.draft is not None else "",
            pair.target_info,
            pair.draft_info,
            str(pair.device),
            pair.vocab_size,
            pair_instruct_reason(pair),
        )
        return info, False, None

    def refusal(self, drafting: tuple) -> tuple[str, str] | None:
        """Why a session with this drafter cannot start on the loaded pair, or None."""
        drafter = drafting[0]
        if drafter is not None and drafter.needs_draft_model and self.pair.draft is None:
            return (
                "No draft model loaded",
                "The models were loaded for a drafter without a draft model. Press Load "
                "models to load the draft as well, or choose prompt lookup or early exit in "
                "the Drafting box.",
            )
        return None

    def drop_session(self) -> None:
        """After a failed round: the next Step starts a new session."""
        if self.engine is not None:
            self.engine.close()

    def drop(self) -> None:
        pass

    def close(self) -> None:
        pass
