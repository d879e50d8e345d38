"""How a pair does against the field: `specviz bench` (benchmark questions under several
configurations beside the target alone, runs.py, on question files read by questions.py, and
Spec-Bench's table of them, table.py)
and `specviz doctor` (an engine's own acceptance metrics read in every engine's definitions,
doctor.py, beside specviz's own curve on the pair, curve.py)."""
