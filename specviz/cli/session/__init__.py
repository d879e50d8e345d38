"""The commands that drive a session: `specviz run` (run.py; `--connect`: run_connected.py)
through one loop over either engine (session_loop.py), and `specviz serve` (serve.py), the
session host behind a socket."""
