"""What a round records beyond its tokens, one typed extra each (base.Extra), and their
registry (registry.EXTRAS)."""
