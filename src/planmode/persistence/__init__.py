"""Persistence: checkpointers (SQLite by default, PostgreSQL behind the same interface), the per-thread lease, run
queries, snapshots and plan edits.

The names below are imported when first used (a module ``__getattr__``): importing ``planmode.persistence`` or one of
its LangGraph-free modules (`planmode.persistence.rows`, which ``planmode ls`` reads a SQLite database with)
imports no LangGraph. `planmode.persistence.checkpointers` says what the checkpoint savers made here do.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planmode.persistence.checkpointers import (
        SERDE_ALLOWLIST,
        SERVER_DB_ENV,
        announcing,
        aopen_checkpointer,
        async_postgres_checkpointer,
        async_sqlite_checkpointer,
        await_until_durable,
        open_checkpointer,
        planmode_serializer,
        postgres_checkpointer,
        server_checkpointer,
        sqlite_checkpointer,
        wait_until_durable,
        with_planmode_types,
    )
    from planmode.persistence.lease import thread_lease

__all__ = [
    "SERDE_ALLOWLIST",
    "SERVER_DB_ENV",
    "announcing",
    "aopen_checkpointer",
    "async_postgres_checkpointer",
    "async_sqlite_checkpointer",
    "await_until_durable",
    "open_checkpointer",
    "planmode_serializer",
    "postgres_checkpointer",
    "server_checkpointer",
    "sqlite_checkpointer",
    "thread_lease",
    "wait_until_durable",
    "with_planmode_types",
]

#: The module each re-exported name lives in (every other name of `__all__`: `planmode.persistence.checkpointers`).
_HOMES = {"thread_lease": "planmode.persistence.lease"}


def __getattr__(name: str) -> object:
    """A name of `__all__`, imported from its module on first use (and kept: the next lookup is a plain one)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES.get(name, "planmode.persistence.checkpointers")), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
