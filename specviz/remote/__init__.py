"""The engine behind a socket: `specviz serve` (server.py) and its clients (client.py).

The wire format is docs/protocol.md: JSON requests in, and out the trace format's own
session header and round lines, so a client rebuilds exactly the records a local engine
makes. No Qt here: the window's remote worker (gui/session/remote_link.py) wraps the client.
"""
