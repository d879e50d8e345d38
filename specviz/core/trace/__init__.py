"""The trace format (specviz.trace/1.x): records, JSON, files, autosave, checks. No torch."""
