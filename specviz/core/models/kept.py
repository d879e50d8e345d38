"""Values kept per live model in this process, the least recently used dropped first: what
a session would otherwise recompute from a model each time it starts (an EAGLE-3 head read
and probed, the target alone's greedy reference of a prompt)."""

from __future__ import annotations

import collections
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerModel(Generic[T]):
    """At most `size` values, each for one model and a key of the caller's. A freed model's
    id can be taken by another: a weak reference confirms a kept value is this model's.
    Thread-safe; a value is made under the lock (a window's session and its lab may ask at
    once)."""

    def __init__(self, size: int):
        self.size = size
        self._kept: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, model: object, key: Hashable, make: Callable[[], T]) -> T:
        """The value kept for (model, key), or make()'s, kept."""
        key = (id(model), key)
        with self._lock:
            ref, value = self._kept.pop(key, (None, None))
            if ref is None or ref() is not model:
                value = make()
            self._kept[key] = (weakref.ref(model), value)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
            return value

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
