"""Token trees: one target pass over a tree (attention), the multi-draft rule (walk), the
tree verifier, its records (events) and a reference round from fresh forwards."""
