"""Checkpointers: SQLite by default (one file), with planmode's state types registered with the serializer.

LangGraph's serializer warns about (and in strict mode blocks) types it does not know; planmode's state
types are registered here so checkpoints round-trip silently, now and under ``LANGGRAPH_STRICT_MSGPACK``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from planmode.errors import ConfigurationError

__all__ = ["SERDE_ALLOWLIST", "planmode_serializer", "sqlite_checkpointer", "with_planmode_types"]

#: (module, name) of every planmode type that can be stored in a checkpoint.
SERDE_ALLOWLIST: tuple[tuple[str, str], ...] = (
    *(
        ("planmode.state.models", n)
        for n in ("Plan", "Step", "StepStatus", "Complexity", "PatchRecord", "Rejection", "PlanPatch", "NewStep",
                  "StepUpdate", "StepTransition", "ResetPlan", "StepDefinition")
    ),
    ("planmode.state.reducer", "PlanUpdate"),
    ("planmode.state.graph_state", "StepOutcome"),
)


def planmode_serializer() -> JsonPlusSerializer:
    """LangGraph's serializer with planmode's types allowed explicitly."""
    return JsonPlusSerializer(allowed_msgpack_modules=SERDE_ALLOWLIST)


def sqlite_checkpointer(path: str | Path) -> SqliteSaver:
    """A `SqliteSaver` on one file (created with its folder), safe to share across threads.

    Raises `ConfigurationError` with a clear message when the file cannot be opened or written.
    """
    p = Path(path).expanduser()
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(p), check_same_thread=False, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        saver = SqliteSaver(conn, serde=planmode_serializer())
        saver.setup()
    except (OSError, sqlite3.Error) as exc:
        raise ConfigurationError(f"cannot use database file {str(p)!r}: {exc}") from exc
    return saver


def with_planmode_types(checkpointer: Any) -> Any:
    """``checkpointer`` with planmode's types added to its serializer's allowlist (when it has one)."""
    if checkpointer is None or isinstance(checkpointer, bool) or not hasattr(checkpointer, "with_allowlist"):
        return checkpointer
    return checkpointer.with_allowlist(SERDE_ALLOWLIST)
