"""The EAGLE-3 head commands, `specviz train-head` and `specviz check-head`: all that is left of
a folder named for want of room (issue 51 regroups the command line by purpose: bench and
doctor are in cli/bench/, cache is cli/cache.py; these two are to move into a folder of their
own, e.g. cli/heads/)."""
