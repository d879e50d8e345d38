"""`specviz tune`: the K sweep on a pair and its tables (tune.py), the same advice from a
trace without the models (`--from-trace`, tune_trace.py), and the best configuration in an
engine's own words (`--export`, export_config.py)."""
