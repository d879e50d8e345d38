"""The token tree of a tree round (settings.tree_width > 1): its layout, the view, and the
per-depth acceptance plot."""
