"""The Tune panel: a K sweep on the session's pair, its tables and the advisor."""
