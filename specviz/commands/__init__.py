"""Sub-commands of the `specviz` command line; each module has add_parser() and run()."""
