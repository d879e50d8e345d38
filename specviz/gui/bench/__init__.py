"""The window's view of `specviz bench` results (Tools > Bench results)."""
