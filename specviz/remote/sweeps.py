"""A K sweep on a served engine's models (docs/protocol.md, `sweep`): the request (a prompt
set and a core.tune.sweep.SweepConfig as JSON), each finished run as one message (its
session's header line and round lines, as a trace has them), and the server's side: a
mixin of remote.server.Server that steps the sweep a round at a time between two polls, as
a run, so that a pause (or the client's going) stops it between two rounds."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from specviz.core.trace.records import Settings
from specviz.core.trace.serialize import header_to_json
from specviz.remote import protocol as P


def scalars() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The config object's plain fields, as JSON values of their defaults' types: (the
    Settings fields a sweep's runs share, core.tune.sweep.shared_fields; SweepConfig's own
    plain fields: probe_every, check_greedy, verifier)."""
    from specviz.core.tune.sweep import SweepConfig, shared_fields

    plain = (bool, int, float, str)
    own = tuple(f.name for f in dataclasses.fields(SweepConfig) if type(f.default) in plain)
    return shared_fields(), own


def _drafting(drafter: Any, policy: Any) -> dict[str, Any]:
    """A (DrafterConfig or None, PolicyConfig or None) pair as JSON (null: the default)."""
    return {
        "drafter": None if drafter is None else drafter.to_json(),
        "policy": None if policy is None else dataclasses.asdict(policy),
    }


def sweep_request(prompts, config, traces: bool) -> dict[str, Any]:
    """The `sweep` request for core.tune.promptsets.Prompt items and a SweepConfig; traces:
    the runs' rounds come with their top-N lists (the client writes the traces)."""
    shared, own = scalars()
    defaults = Settings()
    # a shared setting where it differs from its default (a server reads the others as
    # their defaults, and one without a newer field takes a sweep that leaves it alone)
    obj = {n: getattr(config.settings, n) for n in shared}
    obj = {n: v for n, v in obj.items() if v != getattr(defaults, n)}
    obj.update({n: getattr(config, n) for n in own})
    obj.update(ks=list(config.ks), verifiers=list(config.verifiers))
    obj.update(_drafting(config.drafter, config.policy))
    obj["variants"] = [_drafting(d, p) for d, p in config.variants]
    prompts = [{"category": p.category, "text": p.text} for p in prompts]
    return {"op": "sweep", "prompts": prompts, "config": obj, "traces": traces}


def prompts_from_json(obj: Any) -> list:
    """core.tune.promptsets.Prompt items (at most as many as a prompt file may hold; the
    request's size bounds them too); BadMessage or ValueError as config_from_json's."""
    from specviz.core.tune.promptsets import MAX_PROMPTS, Prompt

    if type(obj) is not list or not 0 < len(obj) <= MAX_PROMPTS:
        raise P.BadMessage(f"'prompts' must be a list of 1..{MAX_PROMPTS} prompts")
    prompts = []
    for item in obj:
        if type(item) is not dict or set(item) != {"category", "text"}:
            raise P.BadMessage("a prompt must be an object with a category and a text")
        category, text = (P.typed(f"a prompt's {n}", item[n], str) for n in ("category", "text"))
        if not text:
            raise ValueError("a prompt is empty")
        prompts.append(Prompt(category, text))
    return prompts


def config_from_json(obj: Any):
    """A SweepConfig; BadMessage for a wrong field, ValueError for a bad value (an unknown
    verifier, K out of range, an unknown drafter)."""
    from specviz.core.tune.sweep import SweepConfig

    shared, own = scalars()
    fields = {*shared, *own, "ks", "verifiers", "drafter", "policy", "variants"}
    if type(obj) is not dict or not set(obj) <= fields:
        raise P.BadMessage(f"'config' must be an object with fields among {sorted(fields)}")

    def plain(names: tuple[str, ...], defaults: Any) -> dict[str, Any]:
        return {
            name: P.typed(f"config {name!r}", obj[name], type(getattr(defaults, name)))
            for name in names
            if name in obj
        }

    defaults = SweepConfig()
    values = {**plain(own, defaults), "settings": Settings(**plain(shared, Settings()))}
    for name, kind in (("ks", int), ("verifiers", str)):
        items = obj.get(name, list(getattr(defaults, name)))
        if type(items) is not list:
            raise P.BadMessage(f"config {name!r} must be a list")
        values[name] = tuple(P.typed(f"config {name!r}", v, kind) for v in items)
    if not values["ks"]:
        raise ValueError("a sweep needs at least one K")
    values["drafter"], values["policy"] = P.drafting_from_json(obj, (None, None))
    variants = obj.get("variants", [])
    if type(variants) is not list or not all(type(v) is dict for v in variants):
        raise P.BadMessage("config 'variants' must be a list of drafter and policy objects")
    values["variants"] = tuple(P.drafting_from_json(v, (None, None)) for v in variants)
    config = SweepConfig(**values)
    for label in config.verifiers or (config.verifier,):
        for k in config.ks:
            dataclasses.replace(config, verifier=label).run_settings(k)  # ValueError: bad value
    return config


def run_message(header, run, re: int | None, done: int, total: int) -> bytes:
    """A finished run (core.tune.sweep.SweepRun) and its session's header."""
    diff = run.greedy_diff
    obj = {
        "type": "sweep_run",
        "re": re,
        "done": done,
        "total": total,
        **{name: getattr(run, name) for name in ("prompt_index", "category", "k")},
        **{name: getattr(run, name) for name in ("drafter", "policy", "verifier")},
        "greedy_diff": None if diff is None else dataclasses.asdict(diff),
        "header": header_to_json(header),
        "rounds": [orjson.Fragment(P.round_message(r)) for r in run.rounds],
    }
    return P.encode(obj)


def run_from(message: dict[str, Any]):
    """(SessionHeader, SweepRun) from a `sweep_run` message; RemoteError if it is bad."""
    from specviz.core.decoding.greedy_check import GreedyDiff
    from specviz.core.tune.sweep import SweepRun

    try:
        header = P.header_from(message["header"])
        lines, diff = message["rounds"], message["greedy_diff"]
        if type(lines) is not list:
            raise TypeError("'rounds' is no list")
        cache: dict = {}
        rounds = [P.round_from(r, header.session_id, n + 2, cache) for n, r in enumerate(lines)]
        run = SweepRun(
            prompt_index=P.typed("prompt_index", message["prompt_index"], int),
            category=P.typed("category", message["category"], str),
            k=P.typed("k", message["k"], int),
            rounds=tuple(rounds),
            greedy_diff=None if diff is None else GreedyDiff(**diff),
            **{n: P.typed(n, message[n], str) for n in ("drafter", "policy", "verifier")},
        )
    except (AttributeError, KeyError, TypeError, P.BadMessage) as e:
        raise P.RemoteError(f"the server sent a bad sweep run: {e}", "bad_reply") from None
    return header, run


class SweepOps:
    """The `sweep` op of remote.server.Server, on the serving thread: the sweep's generator
    (the session host's sweep_steps) lives in run_state, and the serve loop calls its "step"
    between polls, one round each (a split target's other ranks are told each step)."""

    def _op_sweep(self, ident: bytes, request: dict, re: int | None) -> list[bytes]:
        if self.run_state is not None:
            why = "a run or a sweep is in progress: pause it first"
            return [P.encode(P.error("running", why, re))]
        prompts = prompts_from_json(request.get("prompts"))
        config = config_from_json(request.get("config"))
        traces = request.get("traces", False)
        if type(traces) is not bool:
            raise P.BadMessage("'traces' must be true or false")
        self.owner = ident  # the sweep holds the server, as a session does
        total = config.n_runs(len(prompts))
        steps = self.host.sweep_steps(prompts, config, record=traces)
        self.run_state = {"re": re, "max": None, "count": 0, "total": total}
        self.run_state.update(step=self._sweep_one, steps=steps)
        self.log(f"a sweep of {total} runs started")
        return []

    def _sweep_one(self) -> None:
        """One round of the sweep in progress; a finished run goes to the client, the end
        of the sweep is its `stopped` (reason finished, or error with the message)."""
        self._tell("sweep_one")
        state = self.run_state
        try:
            finished = next(state["steps"], state)  # state: no run is left
        except Exception as e:  # noqa: BLE001 - a failed run ends the sweep, not the server
            self.log(f"a sweep failed: {type(e).__name__}: {e}")
            self._stopped(state, "error", f"{type(e).__name__}: {e}")
            return
        if finished is state:
            self.log(f"the sweep finished ({state['count']} runs)")
            self._stopped(state, "finished")
        elif finished is not None:
            state["count"] += 1
            message = run_message(*finished, state["re"], state["count"], state["total"])
            self._send(self.owner, [message])
