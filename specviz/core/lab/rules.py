"""The lab's rules and limits: no heavy imports, so the command line starts fast."""

RULES = ("correct", "naive-reject", "resample-from-p")
RULE_LABELS = {
    "correct": "correct: accept with min(1, p/q), else resample from norm(max(0, p - q))",
    "naive-reject": "WRONG: reject whenever p(x) < q(x), deterministically",
    "resample-from-p": "WRONG: on rejection resample from p, not from the residual",
}
MIN_SAMPLES, MAX_SAMPLES = 100, 1_000_000
