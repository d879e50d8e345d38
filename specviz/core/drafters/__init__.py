"""What proposes a round's tokens: a module per drafter, and the registry that lists them."""
