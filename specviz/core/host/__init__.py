"""The session host: sessions on a pair loaded in this process. `opening.open_session` is the
one place a session is made (the engine built, the prompt read, the caches filled); below
core.tune, whose sweeps and bench open their runs there. `session_host.SessionHost` holds a
pair's current session and carries out the Engine seam's operations (core.engine.protocol)
on it: the window's in-process engine, `specviz run` and `specviz serve` (a transport over
it) all drive it; above core.tune, whose sweeps it runs on its pair."""
