"""`specviz serve --tp-size N` under torchrun: rank 0 serves (remote/server.py) and, before
each request it carries out, each run step and each client it loses, broadcasts what it is
about to do; ranks 1..N-1 do the same on their own engine (the same code, the same state,
the same collectives), their replies dropped. So every rank's target runs the same forward
passes in the same order, as its split layers need.
"""

from __future__ import annotations

from specviz.remote.server import Server


def broadcast(message: tuple) -> None:
    """Rank 0: send one message to the other ranks (the Server's mirror)."""
    import torch.distributed as dist

    dist.broadcast_object_list([message], src=0)


class Follower(Server):
    """A Server without a socket: it carries out what rank 0 broadcasts."""

    def __init__(self, pair, specs: tuple[str, str | None], drafting) -> None:
        from specviz.core.decoding.k_policy import PolicyConfig
        from specviz.core.drafters.registry import DrafterConfig
        from specviz.core.host.session_host import SessionHost

        self.specs, self.log = specs, lambda message: None
        self.token, self.address_host, self.stop_fd = "", "", None
        self.host = SessionHost(pair, drafting or (DrafterConfig(), PolicyConfig()))
        self.owner = self.run_state = self.mirror = None
        self.sent: list[bytes] = []
        self.outboxes: dict = {}
        self._burst = lambda kind, message: None

    def _send(self, ident: bytes, frames: list[bytes]) -> bool:
        return True  # rank 0 answers the client

    def follow(self) -> None:
        """Until rank 0 stops: receive each message and do what it says."""
        import torch.distributed as dist

        while True:
            box: list = [None]
            dist.broadcast_object_list(box, src=0)
            kind, *args = box[0]
            if kind == "stop":
                return
            try:
                if kind == "op":
                    op, ident, request, re = args
                    getattr(self, f"_op_{op}")(ident, request, re)
                elif kind == "run_one":
                    self._run_one()
                elif kind == "sweep_one":  # a round of a sweep (remote/sweeps.py)
                    self._sweep_one()
                elif kind == "gone":
                    Server._gone(self, args[0])
            except Exception:  # noqa: BLE001 - rank 0 met the same fault and answered it
                pass

    def _gone(self, ident: bytes) -> None:  # rank 0 says when a client is gone
        pass

    def _tell(self, *message) -> None:
        pass
