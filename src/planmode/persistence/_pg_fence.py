"""The PostgreSQL savers planmode makes: LangGraph's, with every write of a leased thread fenced.

While this process holds the lease of a thread (`planmode.persistence.lease`), ``put`` and ``put_writes`` (and the async
twins) run in one transaction that first reads the thread's lease row ``FOR SHARE`` — a takeover waits until the
write commits, and a write after a takeover sees the new epoch — and refuse the write with `LeaseLostError` when
the row no longer carries this holder's epoch and token (the transaction is rolled back: nothing is written).
Writes of threads this process holds no lease on go through LangGraph's code unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row

from planmode._compat import apg_connection_of, pg_connection_of
from planmode.persistence._savers import apg_connection, pg_connection
from planmode.persistence.lease import (
    DB_KEYS,
    FENCE_SQL,
    PG_DB_SQL,
    ThreadLease,
    check_fence,
    held_lease,
    may_hold,
    pg_db_key,
)

__all__ = ["FencedAsyncPostgresSaver", "FencedPostgresSaver"]

_SQL = FENCE_SQL.replace("?", "%s")
#: The lease the write under way is fenced with (set by put/put_writes around LangGraph's own code).
_WRITING: ContextVar[ThreadLease | None] = ContextVar("planmode_fenced_write", default=None)


def _thread_of(config: Any) -> str:
    return str(((config or {}).get("configurable") or {}).get("thread_id", ""))


class FencedPostgresSaver(PostgresSaver):
    """`PostgresSaver` with the lease's fence (module docstring)."""

    def _lease(self, config: Any) -> ThreadLease | None:
        thread_id = _thread_of(config)
        if not may_hold(thread_id):
            return None
        db = DB_KEYS.get(self)
        if db is None:
            with pg_connection(self) as conn, conn.cursor() as cur:
                cur.execute(PG_DB_SQL)
                db = DB_KEYS[self] = pg_db_key(cur.fetchone())
        return held_lease(db, thread_id)

    @contextmanager
    def _fenced(self, config: Any) -> Iterator[None]:
        token = _WRITING.set(self._lease(config))
        try:
            yield
        finally:
            _WRITING.reset(token)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> RunnableConfig:
        with self._fenced(config):
            return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        with self._fenced(config):
            super().put_writes(config, writes, task_id, task_path)

    @contextmanager
    def _cursor(self, *, pipeline: bool = False) -> Iterator[Any]:
        lease = _WRITING.get()
        if lease is None or self.pipe is not None:
            with super()._cursor(pipeline=pipeline) as cur:
                yield cur
            return
        with (
            self.lock,
            pg_connection_of(self.conn) as conn,
            conn.transaction(),
            conn.cursor(binary=True, row_factory=dict_row) as cur,
        ):
            cur.execute(_SQL, (lease.thread_id,))
            check_fence(lease, cur.fetchone())  # raises: the transaction is rolled back
            yield cur


class FencedAsyncPostgresSaver(AsyncPostgresSaver):
    """`AsyncPostgresSaver` with the lease's fence (module docstring)."""

    async def _alease(self, config: Any) -> ThreadLease | None:
        thread_id = _thread_of(config)
        if not may_hold(thread_id):
            return None
        db = DB_KEYS.get(self)
        if db is None:
            async with apg_connection(self) as conn, conn.cursor() as cur:
                await cur.execute(PG_DB_SQL)
                db = DB_KEYS[self] = pg_db_key(await cur.fetchone())
        return held_lease(db, thread_id)

    @asynccontextmanager
    async def _afenced(self, config: Any) -> AsyncIterator[None]:
        token = _WRITING.set(await self._alease(config))
        try:
            yield
        finally:
            _WRITING.reset(token)

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> RunnableConfig:
        async with self._afenced(config):
            return await super().aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        async with self._afenced(config):
            await super().aput_writes(config, writes, task_id, task_path)

    @asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[Any]:
        lease = _WRITING.get()
        if lease is None or self.pipe is not None:
            async with super()._cursor(pipeline=pipeline) as cur:
                yield cur
            return
        async with (
            self.lock,
            apg_connection_of(self.conn) as conn,
            conn.transaction(),
            conn.cursor(binary=True, row_factory=dict_row) as cur,
        ):
            await cur.execute(_SQL, (lease.thread_id,))
            check_fence(lease, await cur.fetchone())
            yield cur
