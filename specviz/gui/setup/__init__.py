"""The Setup panel: prompt, K and sampling controls, and the Drafting box."""
