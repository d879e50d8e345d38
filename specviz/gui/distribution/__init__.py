"""The distribution panel: p, q, min(p, q), the residual and the draw at one position."""
