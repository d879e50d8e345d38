"""The specviz window (PySide6 + pyqtgraph). Nothing under specviz.core, specviz.remote or
specviz.cli imports this, but the dispatcher (specviz.cli.main) that opens it.

The entry points (app.main, app.open_lab) call refguard.install() first: the PySide6
build pinned here leaks references to None and True on every void Qt call.
"""
