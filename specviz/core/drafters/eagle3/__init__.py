"""EAGLE-3 heads: the drafter (drafter.py) over a head (head.py: the decoder layer, its cache
and step), the formats a head is stored in (format.py: speculators', the authors', SGLang's;
the checks), and how well a head fits a target's layers (fit.py: training-time test passes,
check-head's measurement)."""
