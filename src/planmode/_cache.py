"""A small cache of values built once per object identity (compiled loops, structured-output runnables)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["IdentityCache"]

V = TypeVar("V")


class IdentityCache(Generic[V]):
    """Values built once per (objects, other key parts), the newest ``size`` kept.

    Keyed by the identity of ``objects`` (models and tools are not hashable, and equal is not the same); an
    entry holds its objects, so an id is not reused while the entry lives. Building runs outside the lock: two
    threads may build the same value at once, and the first one kept wins."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], V]] = OrderedDict()
        self._lock = threading.Lock()
        self.builds = 0
        """How many values were built (for tests and profiling)."""

    def get(self, objects: tuple[Any, ...], parts: tuple[Hashable, ...], build: Callable[[], V]) -> V:
        """The value for these objects and parts, built by ``build()`` on a miss."""
        key = (*(id(o) for o in objects), *parts)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit[1]
        value = build()
        with self._lock:
            self.builds += 1
            kept = self._entries.setdefault(key, (objects, value))
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return kept[1]

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
