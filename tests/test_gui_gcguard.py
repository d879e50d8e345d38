"""Cyclic garbage holding Qt objects is freed on the GUI thread, never on an engine thread
(where ~QObject and the GIL deadlocked with the GUI thread: gui/qtfixes/gcguard.py)."""

from __future__ import annotations

import gc
import threading

from PySide6.QtCore import QObject

from specviz.gui.qtfixes import gcguard


def test_automatic_collection_is_off_once_installed(qapp):
    gcguard.install()
    assert not gc.isenabled()
    assert gcguard._collector is not None and gcguard._collector.timer.isActive()


def test_qt_garbage_in_a_cycle_is_freed_on_the_gui_thread(qtbot):
    gcguard.install()
    freed_on: list[int] = []

    class Held(QObject):
        def __del__(self):
            freed_on.append(threading.get_ident())

    held = Held()
    held.me = held  # a cycle: only the cyclic collector frees it
    del held
    kept = []

    def engine_thread():  # allocates far past every generation's threshold, as a forward does
        kept.extend([] for _ in range(50_000))

    worker = threading.Thread(target=engine_thread)
    worker.start()
    worker.join()
    assert freed_on == []  # not on the engine thread (it was, with automatic collection on)
    qtbot.waitUntil(lambda: bool(freed_on), timeout=5000)
    assert freed_on == [threading.main_thread().ident]
