"""The session host: one loaded pair (core.models.pair.ModelPair), its current session and
the Engine seam's operations on it (core.engine.protocol), implemented once.

Three drivers share it: the window's in-process engine (gui.session.local_link), `specviz
run` (cli.session.run, through cli.session.session_loop) and `specviz serve` (remote.server,
a transport that parses a request, calls the host and frames the reply). What a session
cannot do is a HostError (a ValueError, so a user reads its text as it is) with the wire
protocol's error code: the server frames it as that error, the window and `run` say it. Not
thread-safe: one owner thread (the engine worker's, the main thread, the serving thread)."""

from __future__ import annotations

from collections.abc import Iterator

from specviz.core.engine.speculative import SpeculativeEngine
from specviz.core.host.opening import open_session
from specviz.core.trace.records import Round, SessionHeader, Settings
from specviz.core.tune.sweep import run_sweep, sweep_steps


class HostError(ValueError):
    """A session operation the host refuses; `code` is the wire protocol's (docs/protocol.md)."""

    code = "bad_value"


class NoSession(HostError):
    code = "no_session"

    def __init__(self) -> None:
        super().__init__("no session: start one first")


class Finished(HostError):
    code = "finished"

    def __init__(self, reason: str | None) -> None:
        super().__init__(f"the session has finished ({reason})")


class CannotContinue(HostError):
    code = "cannot_continue"


class SessionHost:
    """A session at a time (a SpeculativeEngine, `session`) on one pair. drafting: the
    (DrafterConfig, PolicyConfig) of a start that names none, and of the lab's positions
    before a session (None: the defaults); chat: the chat choice of a start that says None
    (None: a chat turn for an instruct target, core.models.chat)."""

    def __init__(self, pair, drafting: tuple | None = None, chat: bool | None = None):
        self.pair = pair
        self.drafting = drafting or (None, None)
        self.chat = chat
        self.session: SpeculativeEngine | None = None

    # ------------------------------------------------------------------------------ a session

    def start(
        self,
        prompt: str,
        settings: Settings,
        calibrate: bool = True,
        trace: bool = True,
        chat: bool | None = False,
        drafting: tuple | None = None,
    ) -> SessionHeader:
        """A new session; the previous one is dropped once the prompt is read (a prompt the
        target cannot take as a chat turn leaves it), before the new engine is built, so two
        sessions' caches are never held at once."""

        def drop() -> None:
            self.session = None

        self.session = open_session(
            self.pair,
            prompt,
            settings,
            drafting or self.drafting,
            calibrate=calibrate,
            trace=trace,
            chat=self.chat if chat is None else chat,
            before_build=drop,
        )
        return self.session.header

    @property
    def header(self) -> SessionHeader | None:
        return None if self.session is None else self.session.header

    @property
    def finished(self) -> bool:
        return self.session is not None and self.session.finished

    def current(self) -> SpeculativeEngine:
        """The session; NoSession without one."""
        if self.session is None:
            raise NoSession()
        return self.session

    def ready(self) -> SpeculativeEngine:
        """The session, able to take a round; NoSession or Finished otherwise."""
        session = self.current()
        if session.finished:
            raise Finished(session.finish_reason)
        return session

    def step(self) -> Round:
        """One round. A round that fails drops the session (its caches may be half
        updated): the next start begins anew."""
        session = self.ready()
        try:
            return session.step()
        except Exception:
            self.session = None
            raise

    def run(self, max_rounds: int | None = None) -> Iterator[Round]:
        """Rounds until the session finishes or max_rounds; NoSession at once without one."""
        self.current()
        return self._rounds(max_rounds)

    def _rounds(self, max_rounds: int | None) -> Iterator[Round]:
        count = 0
        while not self.finished and (max_rounds is None or count < max_rounds):
            yield self.step()
            count += 1

    def pause(self) -> list[Round]:
        return []  # rounds are made one at a time here: none is ahead

    def update_settings(self, settings: Settings) -> None:
        self.current().update_settings(settings)

    def continue_session(self, settings: Settings) -> None:
        """Go on after max new tokens or end-of-text with these settings; CannotContinue
        after the context length, or before the session has ended."""
        session = self.current()
        if session.finish_reason not in ("max_new_tokens", "eos"):
            why = "it ended at the context length" if session.finished else "it has not ended"
            raise CannotContinue(f"cannot continue: {why}")
        session.update_settings(settings)
        session.finish_reason = None

    def remeasure(self) -> None:
        """A full cost-model probe after the next round."""
        self.current().prober.request_full()

    def close(self) -> None:
        self.session = None

    # ------------------------------------------------------------------------------ the pair

    def _check_ids(self, ids: list[int]) -> list[int]:
        vocab = self.pair.vocab_size
        if any(not 0 <= i < vocab for i in ids):
            raise ValueError(f"a token id is outside the vocabulary (0..{vocab})")
        return list(ids)

    def position(self, context_ids: list[int], settings: Settings, top_n: int = 20):
        """The full-vocabulary p and q after context_ids (core.lab.position): the session's
        drafter's q, else the default drafter's (a draft model's is the pair's own)."""
        from specviz.core.drafters.registry import DrafterConfig, make_drafter
        from specviz.core.lab.position import position_distributions

        ids = self._check_ids(context_ids)
        drafter = None if self.session is None else self.session.drafter
        config = self.drafting[0] or DrafterConfig()
        if drafter is None and not config.needs_draft_model:
            drafter = make_drafter(config, self.pair)
        return position_distributions(self.pair, ids, settings, top_n, drafter)

    def greedy_check(self, prompt_ids: list[int], emitted: list[int]):
        """The target's own greedy decoding of prompt_ids against `emitted`: the first
        difference (core.decoding.greedy_check.GreedyDiff), or None."""
        from specviz.core.decoding.greedy_check import check_greedy

        return check_greedy(self.pair, self._check_ids(prompt_ids), self._check_ids(emitted))

    def sweep(self, prompts, config, cancel=None, on_run=None, trace_dir=None):
        """core.tune.sweep.run_sweep over this host's pair (its own sessions, a run each;
        the host's session is left alone)."""
        return run_sweep(self.pair, prompts, config, cancel, on_run, trace_dir)

    def sweep_steps(self, prompts, config, record: bool = False):
        """The sweep a round at a time (core.tune.sweep.sweep_steps), for a driver that
        stops between two rounds (the server, between two polls)."""
        return sweep_steps(self.pair, prompts, config, record)
