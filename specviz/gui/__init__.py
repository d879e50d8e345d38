"""The specviz window (PySide6 + pyqtgraph). Nothing under specviz.core imports this.

Importing it first guards against the PySide6 build pinned here, which leaks references
to None and True on every void Qt call (see refguard).
"""

from . import refguard

refguard.install()
