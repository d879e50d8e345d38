"""Loading a target/draft pair: local folders, hub ids, the built-in pairs, GGUF weights."""
