"""The engine worker's link to an engine elsewhere: remote.client.RemoteEngine, either
`specviz serve` on another machine (`--connect`) or one in a child process (`--engine
process`); gui.session.worker.EngineWorker drives it on its own thread, so that the window
never waits on the network.

Every wait of the client polls in 0.1 s slices and checks the stop event, so the worker's
shutdown returns within moments even while a request is in flight. A lost connection keeps
every round already emitted (they live in the window's session) and is reported by `error`
and `disconnected`; the next load (re)connects.
"""

from __future__ import annotations

import json

from specviz.gui.session.loaded import Loaded
from specviz.gui.session.worker import EngineThread
from specviz.remote.client import Cancelled, RemoteEngine
from specviz.remote.protocol import ConnectionLost, RemoteError, model_info
from specviz.remote.spawn import ChildServer, engine_threads


def child_args(options) -> list[str]:
    """`specviz serve` arguments for a core.models.load_options.LoadOptions beyond device and
    dtype."""
    if options is None:
        return []
    device_map = options.device_map
    args = [] if device_map is None else ["--device-map", json.dumps(device_map).strip('"')]
    for flag, value in (
        ("--draft-device", options.draft_device),
        ("--attn-implementation", options.attn_implementation),
        ("--revision", options.revision),
        ("--draft-revision", options.draft_revision),
        ("--vocab-bridge", options.vocab_bridge),  # a draft whose tokenizer differs
    ):
        if value:
            args += [flag, value]
    return args + (["--trust-remote-code"] if options.trust_remote_code else [])


def drafting_args(drafting: tuple | None) -> list[str]:
    """`specviz serve` arguments for (DrafterConfig, PolicyConfig): the child's default
    drafting, which also decides whether it loads a draft model (a session's `start` sends
    its own drafting over the wire)."""
    if drafting is None:
        return []
    drafter, policy = drafting
    args = ["--drafter", drafter.kind]
    for param in drafter.spec.params:
        value = dict(drafter.params).get(param.name)
        if value is not None:
            args += [param.flag, str(value)]
    args += ["--policy", policy.kind]
    return args + (["--threshold", repr(policy.threshold)] if policy.kind == "threshold" else [])


class RemoteLink:
    """address/token: a server to connect to; with address None, open() starts a child
    `specviz serve` on the pair it is asked for."""

    THREAD_NAME = "specviz-remote-engine"
    SHUTDOWN_MS = 30_000
    streams = True  # Run: the server makes rounds ahead and the window takes them
    watches = True  # an idle connection is checked
    CANCELLED = (Cancelled,)
    LOST = (ConnectionLost,)
    PLAIN = (RemoteError, ValueError)
    not_ready = ("Not connected", "Load the models (this connects to the engine).")

    def __init__(self, address: str | None = None, token: str | None = None):
        self.address, self.token = address, token
        self.engine: RemoteEngine | None = None
        self.child: ChildServer | None = None
        self.child_threads: int | None = None  # a child engine's torch threads: engine_threads()
        self.resume_next: tuple | None = None  # (SessionHeader, rounds received): next open
        self.drafting: tuple | None = None

    def open(self, target: str, draft: str, device: str, dtype: str, worker):
        """Connect (or start the child engine on this pair) and say hello; resume the
        session of set_resume: (Loaded, resuming, the rounds missed or None), or None once
        a failure is reported."""
        self.close()
        cancel = worker.stop_event.is_set
        try:
            address, token = self.address, self.token
            if address is None:
                worker.busy.emit(f"starting an engine process for {target} + {draft}")
                extra = ("--device", device, "--dtype", dtype, *child_args(worker.load_options))
                extra += ("--threads", str(self.child_threads or engine_threads()))
                extra += tuple(drafting_args(worker.drafting))
                self.child = ChildServer(target, draft, extra, cancel=cancel)
                address, token = self.child.address, self.child.token
            worker.busy.emit(f"connecting to {address}")
            self.engine = RemoteEngine(address, token or "", cancel=cancel)
        except (RemoteError, ValueError) as e:
            self.close()
            worker.fail("Could not connect to the engine", e)
            return None
        finally:
            worker.busy.emit("")
        resume, self.resume_next = self.resume_next, None
        missed = None
        if resume is not None:
            try:
                missed = self.engine.resume(*resume)
            except ConnectionLost as e:
                worker.fail("Could not connect to the engine", e)
                return None
            except RemoteError:
                pass  # the server's session has ended: the next Step starts a new one
        info = self.engine.info
        loaded = Loaded(
            info.get("target_spec") or target,
            info.get("draft_spec") or draft,
            model_info(info["target"]),
            model_info(info["draft"] or {**info["target"], "name": "(no draft model)"}),
            str(info["device"]),
            int(info["vocab_size"]),
            info.get("instruct") if isinstance(info.get("instruct"), str) else None,
        )
        return loaded, resume is not None, missed

    def refusal(self, drafting: tuple) -> None:
        return None  # the server says why it cannot

    def drop_session(self) -> None:
        pass  # the server keeps or ends its session

    def drop(self) -> None:
        if self.engine is not None:
            self.engine.close(timeout=0.5)
            self.engine = None

    def close(self) -> None:
        """Close the connection and stop the child engine (on the worker's thread)."""
        self.drop()
        if self.child is not None:
            self.child.stop()
            self.child = None


def remote_engine_thread(address: str | None = None, token: str | None = None, parent=None):
    """An EngineThread on a RemoteLink: `specviz serve` at address, or a child process."""
    return EngineThread(RemoteLink(address, token), parent)
