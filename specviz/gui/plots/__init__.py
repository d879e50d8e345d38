"""The running plots: acceptance, speedup, accepted length; plot helpers and export."""
