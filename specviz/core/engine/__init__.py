"""The speculative engine (one session's loop) and the cost probes it interleaves with rounds."""
