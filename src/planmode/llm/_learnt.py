"""What planmode keeps per model object: what it learnt (the negotiated mode, the server's context size) and
the runnables built for it (`IdentityCache`)."""

from __future__ import annotations

import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["IdentityCache", "endpoint", "is_openai", "learn", "learnt", "relearn"]

V = TypeVar("V")

_REGISTRY_LOCK = threading.Lock()
#: What planmode learnt about a model object (its negotiated mode, its server's context size), by id(); an
#: entry is dropped when its model is collected, so a new graph (or a new port) learns afresh.
_LEARNT: dict[int, dict[str, Any]] = {}


def learnt(model: Any, key: str) -> Any:
    """What was learnt about ``model`` under ``key`` (None when nothing yet)."""
    with _REGISTRY_LOCK:
        return _LEARNT.get(id(model), {}).get(key)


def learn(model: Any, key: str, value: Any) -> Any:
    """Keep ``value`` for ``model`` unless a value is already kept; return the kept value."""
    ident = id(model)
    with _REGISTRY_LOCK:
        fresh = ident not in _LEARNT
        kept = _LEARNT.setdefault(ident, {}).setdefault(key, value)
    if fresh:
        weakref.finalize(model, _forget, ident)
    return kept


def relearn(model: Any, key: str, value: Any) -> None:
    """Replace what was learnt about ``model`` under ``key``."""
    with _REGISTRY_LOCK:
        _LEARNT.get(id(model), {}).pop(key, None)
    learn(model, key, value)


def _forget(ident: int) -> None:
    with _REGISTRY_LOCK:
        _LEARNT.pop(ident, None)


def is_openai(model: Any) -> bool:
    """Whether ``model`` is a ``ChatOpenAI`` (checking sys.modules avoids a ~1 s import for other models)."""
    module = sys.modules.get("langchain_openai")
    chat_openai = getattr(module, "ChatOpenAI", None) if module is not None else None
    return chat_openai is not None and isinstance(model, chat_openai)


def endpoint(model: Any) -> tuple[str | None, str | None]:
    """The model's base URL (no trailing slash) and model name, when it has them."""
    base = getattr(model, "openai_api_base", None)
    name = getattr(model, "model_name", None)
    return (str(base).rstrip("/") if base else None, str(name) if name else None)


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
