"""The Engine seam (core.engine.protocol) on a pair loaded in this process: its sessions, its
sweeps (core.tune) and the lab's positions, above every other part of core."""
