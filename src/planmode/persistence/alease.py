"""The thread lease on the async path: `arun`, `astream` and `athread_lease`, for ``ainvoke``/``astream`` on the
async checkpointers (``AsyncSqliteSaver``, ``AsyncPostgresSaver``) without blocking the event loop.

    from planmode import arun
    from planmode.persistence import aopen_checkpointer

    async with aopen_checkpointer("runs.sqlite") as saver:   # or a postgresql:// URL
        graph = build_graph(checkpointer=saver)
        result = await arun(graph, {"messages": [("user", "...")]}, {"configurable": {"thread_id": "t1"}})

The lease is the same row in the same table (``planmode_leases``) as `planmode.persistence.lease`'s, so a sync process
and an async one exclude each other on one database, and it fences the holder's writes the same way (its epoch;
`aassert_lease_held` is `planmode.persistence.lease.assert_lease_held` for async code). On an async saver it is taken,
renewed (an asyncio task every
``ttl / 3`` seconds) and released through the saver's own connection, under the saver's lock; the few
file reads that tell a dead holder (``/proc``) run in a worker thread. A sync ``SqliteSaver`` or
``PostgresSaver`` given to the async entry points is leased in a worker thread; any other saver gets a lease
local to this process, as with `planmode.persistence.lease.thread_lease`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any, Protocol

from langgraph.checkpoint.base import BaseCheckpointSaver

from planmode.errors import ConfigurationError, LeaseLostError
from planmode.persistence._savers import apg_connection, is_async_postgres, is_async_sqlite
from planmode.persistence.lease import (
    _DB_KEYS,
    ADD_EPOCH_SQL,
    FENCE_FUNCTION,
    FENCED_TABLES,
    INSERT_SQL,
    LEASE_TTL,
    PG_DB_SQL,
    RELEASE_SQL,
    RENEW_SQL,
    SQLITE_DB_SQL,
    TAKEOVER_SQL,
    ThreadLease,
    _decide,
    _heartbeat,
    _lease_of,
    _LocalStore,
    _new_lease,
    _plain,
    _Store,
    _store_for,
    _thread_of,
    columns_sql,
    create_sql,
    hold,
    pg_db_key,
    refused_write,
    select_sql,
    sqlite_db_key,
    sqlite_fence_function,
    sqlite_fence_sql,
    unhold,
)

__all__ = ["aassert_lease_held", "arun", "astream", "athread_lease"]

log = logging.getLogger(__name__)


class ARows(Protocol):
    """A cursor after one statement, of aiosqlite or psycopg's async connection."""

    @property
    def rowcount(self) -> int: ...

    async def fetchone(self) -> Any: ...

    async def fetchall(self) -> Iterable[Any]: ...


#: ``await execute(sql, params)`` in one write transaction (`_AsyncSqlStore._transaction`).
Execute = Callable[..., Awaitable[ARows]]


@asynccontextmanager
async def athread_lease(checkpointer: Any, thread_id: str, *, ttl: float = LEASE_TTL) -> AsyncIterator[ThreadLease]:
    """`planmode.thread_lease` for async code: hold the lease of ``thread_id`` for the block, never blocking
    the event loop (see the module docstring).

    Raises:
        ThreadBusyError: another live process (or another block in this one) holds it.
        ConfigurationError: ``checkpointer`` is not a checkpointer, or ``ttl`` is not positive.
    """
    if not isinstance(checkpointer, BaseCheckpointSaver):
        raise ConfigurationError(f"athread_lease needs a checkpointer, got {type(checkpointer).__name__}")
    if not ttl > 0:
        raise ConfigurationError(f"the lease ttl must be positive, got {ttl}")
    thread_id = str(thread_id)
    store = await _astore_for(checkpointer)
    if store is not None:  # an async saver: its own connection, on this loop
        lease = await store.acquire(thread_id, ttl)
        held = hold(lease)
        beat = asyncio.create_task(_aheartbeat(store, lease), name=f"planmode-lease-{thread_id}")
        try:
            yield lease
        except Exception as exc:
            lost = refused_write(exc, lease.thread_id, lease)
            if lost is not None and lost is not exc:
                raise lost from exc
            raise
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
            await store.release(lease)
            unhold(lease, held)
        return
    sync_store: _Store = await asyncio.to_thread(_store_for, checkpointer)  # may create the table: off the loop
    if isinstance(sync_store, _LocalStore):  # in memory, no I/O
        lease = sync_store.acquire(thread_id, ttl)
    else:
        lease = await asyncio.to_thread(sync_store.acquire, thread_id, ttl)
    sync_held = hold(lease)
    thread = threading.Thread(
        target=_heartbeat, args=(sync_store, lease), name=f"planmode-lease-{thread_id}", daemon=True
    )
    thread.start()
    try:
        yield lease
    except Exception as exc:
        lost = refused_write(exc, lease.thread_id, lease)
        if lost is not None and lost is not exc:
            raise lost from exc
        raise
    finally:
        lease._stop.set()
        await asyncio.to_thread(thread.join, ttl)
        await asyncio.to_thread(sync_store.release, lease)
        unhold(lease, sync_held)


async def aassert_lease_held(config: Any = None) -> None:
    """`planmode.persistence.lease.assert_lease_held` for async code: the database is asked (the lease renewed) without
    blocking the event loop, only when the lease was not renewed within half its ttl."""
    lease = _lease_of(config)
    if lease is None or (not lease.lost and time.monotonic() - lease.renewed < lease.ttl / 2):
        return
    store = lease._store
    if not lease.lost and isinstance(store, _AsyncSqlStore):
        if await store.renew(lease):
            return
        lease.lost = True
    elif not lease.lost and isinstance(store, _Store):
        if await asyncio.to_thread(store.renew, lease):
            return
        lease.lost = True
    if lease.lost:
        raise LeaseLostError(lease.thread_id, lease.epoch)


async def arun(graph: Any, input: Any, config: Any, **kwargs: Any) -> Any:
    """``await graph.ainvoke(input, config, **kwargs)`` while holding the thread's lease (`planmode.run` for
    async code). Raises `ThreadBusyError` when another process, or another run of this one, is running the
    thread; a graph without a checkpointer of its own runs without a lease (a LangGraph server serialises the
    runs of a thread itself)."""
    saver = getattr(graph, "checkpointer", None)
    if not isinstance(saver, BaseCheckpointSaver):
        return await graph.ainvoke(input, config, **kwargs)
    async with athread_lease(saver, _thread_of(config)):
        return await graph.ainvoke(input, config, **kwargs)


async def astream(graph: Any, input: Any, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
    """``graph.astream(input, config, **kwargs)`` while holding the thread's lease (as `arun`). The lease is
    released when the stream ends; a consumer that stops early should close it
    (``async with contextlib.aclosing(astream(...)) as chunks``)."""
    saver = getattr(graph, "checkpointer", None)
    if not isinstance(saver, BaseCheckpointSaver):
        async for chunk in graph.astream(input, config, **kwargs):
            yield chunk
        return
    async with athread_lease(saver, _thread_of(config)):
        async for chunk in graph.astream(input, config, **kwargs):
            yield chunk


async def _aheartbeat(store: _AsyncSqlStore, lease: ThreadLease) -> None:
    interval = max(0.05, lease.ttl / 3)
    while True:
        await asyncio.sleep(interval)
        try:
            if not await store.renew(lease):
                lease.lost = True
                log.warning("the lease of thread %r was taken over by another process", lease.thread_id)
                return
        except Exception as exc:  # a database hiccup: the next beat tries again (the ttl leaves room)
            log.warning("could not renew the lease of thread %r: %s", lease.thread_id, exc)


# -- where it is kept ------------------------------------------------------------------------------------


class _AsyncSqlStore:
    """The lease table through an async saver's connection (aiosqlite, or psycopg's async connection/pool)."""

    def __init__(self, saver: Any, postgres: bool) -> None:
        self.saver = saver
        self.postgres = postgres
        self.ready = False
        self.db = ""

    async def setup(self) -> None:
        if self.ready:
            return
        try:
            async with self._transaction() as execute:
                await self._prepare(execute)
        except Exception:  # a concurrent CREATE on PostgreSQL (see planmode.persistence.lease): the table exists now
            async with self._transaction() as execute:
                await self._prepare(execute)
        if not self.postgres:
            await self._install_fence()
        _DB_KEYS[self.saver] = self.db
        self.ready = True

    async def _prepare(self, execute: Execute) -> None:
        """As `planmode.persistence.lease._SqlStore._prepare`: the table, its epoch column, which database."""
        await execute(create_sql(self.postgres))
        names = {_plain(r)[0] for r in await (await execute(columns_sql(self.postgres))).fetchall()}
        if "epoch" not in names:
            await execute(ADD_EPOCH_SQL)
        if self.postgres:
            self.db = pg_db_key(await (await execute(PG_DB_SQL)).fetchone())

    async def _install_fence(self) -> None:
        """`planmode.persistence.lease.install_sqlite_fence` on the aiosqlite connection."""
        saver = self.saver
        await saver.setup()  # the tables the triggers watch
        async with saver.lock:
            conn = saver.conn
            rows = await (await conn.execute(SQLITE_DB_SQL)).fetchall()
            self.db = sqlite_db_key(rows, conn)
            await conn.create_function(FENCE_FUNCTION, 1, sqlite_fence_function(self.db))
            for table in FENCED_TABLES:
                await conn.execute(sqlite_fence_sql(table))
            if conn.in_transaction:
                await conn.commit()

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Execute]:
        """``await execute(sql, params) -> cursor`` inside one write transaction."""
        if self.postgres:
            async with apg_connection(self.saver) as conn, conn.transaction(), conn.cursor() as pg_cur:
                pg_rows: ARows = pg_cur

                async def execute_pg(sql: str, params: tuple[Any, ...] = ()) -> ARows:
                    await pg_cur.execute(sql.replace("?", "%s"), params)
                    return pg_rows

                yield execute_pg
            return
        saver = self.saver
        async with saver.lock:  # the saver's own writes wait: none lands inside this transaction
            conn = saver.conn
            if conn.in_transaction:
                await conn.commit()
            cur = await conn.cursor()
            rows: ARows = cur
            await cur.execute("BEGIN IMMEDIATE")  # the write lock now: two processes decide one after the other
            try:

                async def execute_sqlite(sql: str, params: tuple[Any, ...] = ()) -> ARows:
                    await cur.execute(sql, params)
                    return rows

                yield execute_sqlite
            except BaseException:
                await conn.rollback()
                raise
            else:
                await conn.commit()
            finally:
                await cur.close()

    async def acquire(self, thread_id: str, ttl: float) -> ThreadLease:
        lease, values = await asyncio.to_thread(_new_lease, thread_id, ttl)  # reads /proc/<pid>/stat
        lease.db, lease._store = self.db, self
        async with self._transaction() as execute:
            if (await execute(INSERT_SQL, values)).rowcount == 1:
                lease.epoch = 1
                return lease
            row = await (await execute(select_sql(self.postgres), (thread_id,))).fetchone()
            await asyncio.to_thread(_decide, lease, _plain(row))  # is the holder alive? (/proc again)
            await execute(TAKEOVER_SQL, (*values[1:], lease.epoch, thread_id))
        if lease.taken_over is not None:
            log.info("took over the lease of thread %r from %s (gone)", thread_id, lease.taken_over)
        return lease

    async def renew(self, lease: ThreadLease) -> bool:
        began = time.monotonic()
        now = time.time()
        async with self._transaction() as execute:
            cur = await execute(RENEW_SQL, (now, now + lease.ttl, lease.thread_id, lease.token))
            renewed = bool(cur.rowcount == 1)
        if renewed:
            lease.renewed = began
        return renewed

    async def release(self, lease: ThreadLease) -> None:
        try:
            async with self._transaction() as execute:
                await execute(RELEASE_SQL, (lease.thread_id, lease.token))
        except Exception as exc:  # the database is gone: the lease expires on its own
            log.warning("could not release the lease of thread %r: %s", lease.thread_id, exc)


_astores: weakref.WeakKeyDictionary[Any, _AsyncSqlStore] = weakref.WeakKeyDictionary()


async def _astore_for(saver: Any) -> _AsyncSqlStore | None:
    """The async store of an async saver (its table created once per saver object), else None."""
    if is_async_sqlite(saver) or is_async_postgres(saver):
        store = _astores.get(saver)
        if store is None:
            store = _astores[saver] = _AsyncSqlStore(saver, postgres=is_async_postgres(saver))
        await store.setup()
        return store
    return None
