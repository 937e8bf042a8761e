"""Values derived from an object, kept while the object lives: the loader hands out the same statistics object
while a table's listing is unchanged, so what a rewrite derives from a table's files alone (the quoted keys of
``rewriter/emit.py``, the name order of ``rewriter/name_ranges.py``) is computed once per listing rather than
once per statement."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerObject(Generic[T]):
    """At most ``size`` entries, the oldest dropped first; an entry goes when its object does (``id`` values are
    reused), and an entry built with another ``tag`` (what else the value was derived from) is built again."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: dict[int, tuple[weakref.ref, Hashable, T]] = {}
        self._lock = threading.Lock()

    def get(self, obj: object, build: Callable[[], T], tag: Hashable = None) -> T:
        key = id(obj)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0]() is obj and hit[1] == tag:
                return hit[2]
        value = build()

        def forget(ref: weakref.ref) -> None:
            with self._lock:
                if self._entries.get(key, (None,))[0] is ref:
                    del self._entries[key]

        with self._lock:
            self._entries.pop(key, None)
            while len(self._entries) >= self.size:
                del self._entries[next(iter(self._entries))]
            self._entries[key] = (weakref.ref(obj, forget), tag, value)
        return value

    def ids(self) -> set[int]:
        """The ``id`` of every object with an entry."""
        with self._lock:
            return set(self._entries)
