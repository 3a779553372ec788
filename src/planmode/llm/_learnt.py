"""What planmode learnt per model object: the negotiated structured-output mode, the server's context size."""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any

__all__ = ["endpoint", "is_openai", "learn", "learnt", "relearn"]

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
