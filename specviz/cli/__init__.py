"""The `specviz` command line: main (the dispatcher), a module per command, shared options."""
