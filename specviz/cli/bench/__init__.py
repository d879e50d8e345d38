"""The commands that measure against the field: `specviz bench` (benchmark questions,
Spec-Bench's table; bench.py, its text bench_text.py) and `specviz doctor` (an engine's own
acceptance metrics, in every engine's definitions; doctor.py)."""
