"""Which K is fastest: interleaved sweeps over prompt sets, and their tables."""
