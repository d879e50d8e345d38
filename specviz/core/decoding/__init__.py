"""One round's mechanics: warp, the verification rule, forward passes, cache edits, K policy."""
