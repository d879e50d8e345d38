"""Figures from rounds: running stats, the cost model, the speedup, position bars, CSV. No torch."""
