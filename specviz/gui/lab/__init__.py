"""The losslessness lab window: editable p and q, arithmetic, Monte Carlo, a real position."""
