"""Tools > Check greedy against the target alone: for a greedy session, the target's own
greedy decoding of the same prompt, on the worker thread (core.decoding.greedy_check), and the first
position where the two differ (none is expected), with the target's logits of both
candidates there. GUI thread only."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from specviz.gui import dialogs
from specviz.gui.session.controller import SessionController

TITLE = "Greedy against the target alone"


def greedy_problem(controller: SessionController) -> str | None:
    """Why the check cannot run now; None if it can."""
    session = controller.session
    if not controller.state.live or controller.models is None:
        return "The check needs the models of a live session (not a replayed trace)."
    if session is None or not session.rounds:
        return "No rounds yet: Step or Run a greedy session (temperature 0) first."
    temperatures = {(r.settings or session.header.settings).temperature for r in session.rounds}
    if temperatures != {0}:
        return (
            "The session is not greedy: set the temperature to 0 and start a new session "
            "(only greedy decoding has one right answer to compare with)."
        )
    if controller.waiting:
        return "The worker is busy: pause, wait for the round, then check."
    return None


def describe(n_tokens: int, diff) -> str:
    """The outcome in words (diff: a core.decoding.greedy_check.GreedyDiff, or None)."""
    if diff is None:
        return (
            f"Same tokens: the session's {n_tokens} tokens are exactly the target's own "
            "greedy decoding of the prompt."
        )
    return (
        f"The first difference is at generated token {diff.position + 1} of {n_tokens}: the "
        f"session emitted {diff.text_ours!r} (id {diff.ours}), the target alone "
        f"{diff.text_theirs!r} (id {diff.theirs}).\n\nThe target's logits there (one "
        f"single-row pass): {diff.text_ours!r} {diff.logit_ours:.6f}, {diff.text_theirs!r} "
        f"{diff.logit_theirs:.6f} (difference {diff.logit_theirs - diff.logit_ours:.2e}). "
        "A near tie is the usual cause: a batched pass over K + 1 tokens and a single-row "
        "pass round differently."
    )


class GreedyCheckPresenter:
    """Asks the worker for the check and shows its answer."""

    def __init__(self, controller: SessionController, parent: QWidget | None = None):
        self.controller = controller
        self.parent = parent
        self.last: tuple[int, object] | None = None  # (n_tokens, GreedyDiff | None)
        controller.engine.greedy_checked.connect(self._on_checked)

    def check(self) -> bool:
        problem = greedy_problem(self.controller)
        if problem:
            dialogs.info(self.parent, TITLE, problem)
            return False
        session = self.controller.session
        emitted = [t.id for r in session.rounds for t in r.tokens if t.emitted]
        self.controller.engine.request_greedy_check.emit(list(session.header.prompt_ids), emitted)
        return True

    def _on_checked(self, result) -> None:
        self.last = result
        dialogs.info(self.parent, TITLE, describe(*result))
