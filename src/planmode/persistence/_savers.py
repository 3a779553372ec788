"""What planmode's own SQL (leases, durability checks, run queries) needs to know about a stock saver."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

__all__ = ["apg_connection", "is_async_postgres", "is_async_sqlite", "is_postgres", "pg_connection"]


def is_postgres(saver: Any) -> bool:
    """True for a ``PostgresSaver``. Imports nothing: a saver of that class exists only once its module is
    loaded, and a first import of psycopg (it runs ``ldconfig`` in a subprocess to find libpq) must not happen
    on an event loop (the LangGraph server's blocking-call detector refuses it)."""
    module = sys.modules.get("langgraph.checkpoint.postgres")
    return module is not None and isinstance(saver, module.PostgresSaver)


@contextmanager
def pg_connection(saver: Any) -> Iterator[Any]:
    """A connection of a ``PostgresSaver``: from its pool, or its one connection under its lock."""
    from psycopg_pool import ConnectionPool

    conn = saver.conn
    # (a psycopg Connection has a ``connection`` attribute too: only a pool's is the method to call)
    if isinstance(conn, ConnectionPool):
        with conn.connection() as c:
            yield c
    else:  # one connection, shared with the saver: take its lock as the saver does
        with saver.lock:
            yield conn


def is_async_sqlite(saver: Any) -> bool:
    """True for an ``AsyncSqliteSaver`` (imports nothing, as `is_postgres`)."""
    module = sys.modules.get("langgraph.checkpoint.sqlite.aio")
    return module is not None and isinstance(saver, module.AsyncSqliteSaver)


def is_async_postgres(saver: Any) -> bool:
    """True for an ``AsyncPostgresSaver`` (imports nothing, as `is_postgres`)."""
    module = sys.modules.get("langgraph.checkpoint.postgres.aio")
    return module is not None and isinstance(saver, module.AsyncPostgresSaver)


@asynccontextmanager
async def apg_connection(saver: Any) -> AsyncIterator[Any]:
    """A connection of an ``AsyncPostgresSaver``: from its pool, or its one connection under its lock."""
    conn = saver.conn
    pool = sys.modules.get("psycopg_pool")
    if pool is not None and isinstance(conn, pool.AsyncConnectionPool):
        async with conn.connection() as c:
            yield c
    else:  # one connection, shared with the saver: take its lock as the saver does
        async with saver.lock:
            yield conn
