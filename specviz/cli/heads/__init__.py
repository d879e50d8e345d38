"""The EAGLE-3 head commands: `specviz train-head` (train_head.py: a head for any target from
text, the target's soft labels computed online, core.training) and `specviz check-head`
(check_head.py: how well a head fits a target, on which layers)."""
