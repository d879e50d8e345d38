"""The specviz window (PySide6 + pyqtgraph). Nothing under specviz.core, specviz.remote or
specviz.cli imports this, but the dispatcher (specviz.cli.main) that opens it.

A *presenter* (LabPresenter, TunePresenter, GreedyCheckPresenter, ConnectionPresenter) wires
one feature's window or banner to the session controller: it opens the view, forwards the
controller's signals to it and its requests back; it owns no state of the session.

The entry points (app.main, app.open_lab) call refguard.install() first: the PySide6
build pinned here leaks references to None and True on every void Qt call.
"""
