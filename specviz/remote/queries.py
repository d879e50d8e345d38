"""The server's questions about its models, beside the session: the lab's position (p and q
at a context) and the greedy check (the target's own greedy decoding against the session's
tokens), both the session host's (core.host.session_host); here they are parsed, timed in
the log and framed. A mixin of remote.server.Server, on the serving thread."""

from __future__ import annotations

import dataclasses
import time

from specviz.remote import protocol as P

MAX_GREEDY_TOKENS = 4096  # tokens a greedy check decodes, at most (the request's size bounds it)


class ModelQueries:
    def _context(self, request: dict, key: str) -> list[int]:
        ids = request.get(key)
        if type(ids) is not list or not all(type(i) is int for i in ids):
            raise P.BadMessage(f"'{key}' must be a list of integers")
        return ids  # the host refuses an id outside the vocabulary

    def _op_position(self, ident: bytes, request: dict, re: int | None) -> list[bytes]:
        ids, top_n = self._context(request, "context_ids"), request.get("top_n", 20)
        if type(top_n) is not int or not 1 <= top_n <= 1000:
            raise P.BadMessage("'top_n' must be an integer in 1..1000")
        settings = P.settings_from_json(request.get("settings", {}))
        started = time.perf_counter()
        result = self.host.position(ids, settings, top_n)
        self.log(f"position at {len(ids)} tokens ({1000 * (time.perf_counter() - started):.0f} ms)")
        self.owner = self.owner or ident  # the lab's requests hold the server too
        return P.position_frames(result, re)

    def _op_greedy(self, ident: bytes, request: dict, re: int | None) -> list[bytes]:
        """The target's greedy decoding of prompt_ids against `emitted`: the first
        difference (core.decoding.greedy_check.GreedyDiff as an object), or null."""
        prompt, emitted = self._context(request, "prompt_ids"), self._context(request, "emitted")
        if not prompt or len(emitted) > MAX_GREEDY_TOKENS:
            raise ValueError(f"a greedy check takes a prompt and 1..{MAX_GREEDY_TOKENS} tokens")
        started = time.perf_counter()
        diff = self.host.greedy_check(prompt, emitted)
        self.log(f"greedy check of {len(emitted)} tokens ({time.perf_counter() - started:.1f} s)")
        found = None if diff is None else dataclasses.asdict(diff)
        return [P.encode({"type": "greedy", "re": re, "n": len(emitted), "diff": found})]
