"""A session's life in the window: the controller, its state, and the engines it drives."""
