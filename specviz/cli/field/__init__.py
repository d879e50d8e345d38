"""The field's numbers: `specviz bench` (benchmark questions, Spec-Bench's table) and
`specviz doctor` (an engine's own acceptance metrics, in every engine's definitions)."""
