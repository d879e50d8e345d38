"""Python's cyclic garbage collector, run on the GUI thread only.

CPython collects cycles on whichever thread happens to allocate past a threshold. When
that is an engine thread (a torch forward allocates a lot) and the garbage holds Qt objects
(a closed dialog, an old window's menus), their C++ destructors run there: ~QObject takes a
Qt mutex and then asks for the GIL to look up a Python override, while the GUI thread,
holding the GIL, waits in its own ~QObject for that mutex. Both wait forever (seen as a
test that hung with the GUI thread in a paint event and the engine thread in
gc_collect_main). So automatic collection is off and a timer on the GUI thread collects
each generation when its count passes the threshold CPython would have used, as
PyQt/PySide applications with worker threads commonly do.

Installed by the entry points (gui.app._application) and by the tests' conftest.py.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QCoreApplication, QObject, QTimer

INTERVAL_MS = 500
_collector: GuiThreadCollector | None = None


class GuiThreadCollector(QObject):
    def __init__(self, parent: QObject, interval_ms: int = INTERVAL_MS):
        super().__init__(parent)
        self.thresholds = gc.get_threshold()  # (700, 10, 10) by default
        self.timer = QTimer(self)
        self.timer.timeout.connect(self.collect)
        self.timer.start(interval_ms)

    def collect(self) -> None:
        """What CPython's own trigger would have done by now: the youngest generation past
        its threshold, and each older one whose count has passed its own."""
        counts = gc.get_count()
        generation = -1
        for gen, (count, threshold) in enumerate(zip(counts, self.thresholds, strict=True)):
            if threshold and count > threshold:
                generation = gen
            else:
                break
        if generation >= 0:
            gc.collect(generation)


def install() -> bool:
    """Turn automatic collection off and collect on the GUI thread (once; needs the
    QApplication). Returns True when it did."""
    global _collector
    app = QCoreApplication.instance()
    if _collector is not None or app is None:
        return False
    _collector = GuiThreadCollector(app)
    gc.disable()
    return True
