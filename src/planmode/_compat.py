"""The seam with LangGraph's and openai's private names: every one planmode relies on, in one place.

planmode uses a few names that its dependencies do not document. They are imported here and nowhere else, so
a LangGraph (or openai) release that moves or changes one touches this module only, and
``tests/ecosystem/test_compat.py`` pins what planmode assumes of each: that the name exists and behaves as
relied on below.

- `RunnableCallable`: LangGraph's node with a sync and an async function (``invoke`` runs one, ``ainvoke``
  the other); every planmode node is one, and the wrappers rebuild one from its two functions.
- ``CONFIG_KEY_*`` and `NS_SEP`: where a running task finds, in its config's ``configurable``, the checkpointer,
  its checkpoint namespace, the ids of the checkpoints it runs from and the run's durability; `NS_SEP`
  separates the levels of a namespace. The durability wait reads them.
- `CONFIG_KEY_RESUMING`: set (true) in a task's config while the run resumes from an interrupt or a crash.
- `CONFIG_KEY_READ`: a running task's read of the graph's channels as its super-step started
  (``read(keys, fresh)``, as LangGraph's ToolNode uses it); `CONFIG_KEY_RUNTIME`: the run's `Runtime`, whose
  ``stream_writer`` is one object per graph invocation.
- `pg_connection_of` / `apg_connection_of`: a connection of a ``PostgresSaver`` / ``AsyncPostgresSaver``'s
  ``conn`` (a connection or a pool), as LangGraph's own savers take one.
- `INTERNAL_CHANNEL_PREFIXES`: channels whose names start with these are LangGraph's own (the triggers of
  edges and branches, the pending ``Send`` tasks), not state keys.
- `type_to_response_format_param`: the openai client's rendering of a pydantic class as a json_schema
  ``response_format`` (strict schema, named after the class); None when this openai version lacks it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager as _AsyncContext
from contextlib import AbstractContextManager as _Context
from typing import Any, TypeAlias

from langgraph._internal._constants import (
    CONFIG_KEY_CHECKPOINT_MAP,
    CONFIG_KEY_CHECKPOINT_NS,
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_DURABILITY,
    CONFIG_KEY_READ,
    CONFIG_KEY_RESUMING,
    CONFIG_KEY_RUNTIME,
    NS_SEP,
)
from langgraph._internal._runnable import RunnableCallable

__all__ = [
    "CONFIG_KEY_CHECKPOINTER",
    "CONFIG_KEY_CHECKPOINT_MAP",
    "CONFIG_KEY_CHECKPOINT_NS",
    "CONFIG_KEY_DURABILITY",
    "CONFIG_KEY_READ",
    "CONFIG_KEY_RESUMING",
    "CONFIG_KEY_RUNTIME",
    "INTERNAL_CHANNEL_PREFIXES",
    "NS_SEP",
    "GraphNode",
    "RunnableCallable",
    "apg_connection_of",
    "pg_connection_of",
    "type_to_response_format_param",
]

#: A graph node as planmode's pipeline wraps it: a function (sync or async), or a `RunnableCallable` with both.
GraphNode: TypeAlias = RunnableCallable | Callable[..., Any]

#: Prefixes of the channels LangGraph adds to a graph's own (``branch:to:<node>``, ``__pregel_tasks``, ...).
INTERNAL_CHANNEL_PREFIXES = ("branch:", "__pregel_")


def type_to_response_format_param(schema: type[Any]) -> Any:
    """The ``response_format`` the openai client sends for ``schema`` (its own private renderer), or None when
    this openai version has no such function. Imported on call: importing openai is slow and it is optional."""
    try:
        from openai.lib._parsing._completions import type_to_response_format_param as render
    except ImportError:  # pragma: no cover - older openai clients; the caller falls back
        return None
    return render(schema)


def pg_connection_of(conn: Any) -> _Context[Any]:
    """A connection of a ``PostgresSaver``'s ``conn`` (its pool's, or the connection itself), held for the block.
    Imported on call: PostgreSQL support is optional."""
    from langgraph.checkpoint.postgres import _internal

    return _internal.get_connection(conn)


def apg_connection_of(conn: Any) -> _AsyncContext[Any]:
    """`pg_connection_of` for an ``AsyncPostgresSaver``'s ``conn``."""
    from langgraph.checkpoint.postgres import _ainternal

    return _ainternal.get_connection(conn)
