"""The token stream: each round's drafted tokens coloured by fate, and the end banner."""
