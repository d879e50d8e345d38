"""Qt workarounds, installed by the entry points: GC on the GUI thread only, refcount guards."""
