"""The losslessness lab: the seeds' arithmetic, Monte Carlo of the rule, a real position."""
