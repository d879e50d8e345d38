"""The specviz window (PySide6 + pyqtgraph). Nothing under specviz.core or
specviz.commands imports this.

The entry points (app.main, app.open_lab) call refguard.install() first: the PySide6
build pinned here leaks references to None and True on every void Qt call.
"""
