"""Keep None, True and False alive under a PySide6 build that leaks references to them.

The PySide6 6.12.0 wheel these machines use returns None from wrapped void C++ methods
(QLabel.setText, QPainter.drawRect, QCoreApplication.processEvents, ...) and True from
SignalInstance.emit() without a new reference. CPython 3.11 counts references to these
singletons like any other object's, so after a few thousand such calls (a bare script
dies after about 5,000 QLabel.setText calls) it frees None and aborts with "Fatal Python
error: none_dealloc" (or bool_dealloc). A correct program never frees them, so raising
their counts once by a constant far beyond any session's number of calls (2**40) makes the
leak harmless. Python 3.12+ makes them immortal, and a build without the leak is left
alone: `install()` probes first.

Installed by the entry points (gui.app.main and open_lab) and by the tests' conftest.py:
every window of the package, the lab's included, needs it before its first few thousand
Qt calls.
"""

from __future__ import annotations

import ctypes
import sys

BOOST = 1 << 40
_installed = False


def leaks() -> bool:
    """Does a void Qt call or a signal emission lose a reference to None or True?"""
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        fired = Signal()

    probe = _Probe()
    none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(8):
        probe.setObjectName("specviz-probe")  # void
        probe.fired.emit()  # returns True
    return sys.getrefcount(None) < none_before or sys.getrefcount(True) < true_before


def install() -> bool:
    """Raise the counts of None, True and False if this PySide6 leaks them (once, GUI or
    not). Returns True when it did."""
    global _installed
    if _installed or sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    if not leaks():
        return False
    for singleton in (None, True, False):
        # ob_refcnt is the first field of every CPython object
        ctypes.c_ssize_t.from_address(id(singleton)).value += BOOST
    _installed = True
    return True
