"""Checkpointers: SQLite by default (one file), PostgreSQL behind the same interface; and the durability waits.

Re-exported by `planmode.persistence`, which imports this module (and so LangGraph) only when one of its names
is first used.

planmode's checkpoints hold JSON data only (`planmode.graph.pipeline`), so any stock saver reads them
without a warning, with ``LANGGRAPH_STRICT_MSGPACK`` on or off. The savers made here also register
planmode's types with the serializer (`SERDE_ALLOWLIST`): checkpoints written by earlier versions hold
planmode objects, and these savers read them back silently (a stock saver reads them too, with LangGraph's
"unregistered type" warning, or under strict mode as data that the channels rebuild).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

if TYPE_CHECKING:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from planmode.persistence._pg_fence import FencedPostgresSaver

from planmode.errors import ConfigurationError, LeaseLostError
from planmode.persistence._savers import apg_connection, is_async_postgres, is_async_sqlite, is_postgres, pg_connection
from planmode.persistence._saves import SAVES, Announcing
from planmode.persistence._sqlite_saver import SqliteCheckpointSaver, fenced_async
from planmode.persistence.lease import current_lease

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
    "wait_until_durable",
    "with_planmode_types",
]

_T = TypeVar("_T")

#: Environment variable naming the SQLite file of `server_checkpointer` (default below).
SERVER_DB_ENV = "PLANMODE_SERVER_DB"
_SERVER_DB_DEFAULT = ".langgraph_api/planmode.sqlite"

#: (module, name) of every planmode type that checkpoints written before the JSON-data ones may hold.
SERDE_ALLOWLIST: tuple[tuple[str, str], ...] = (
    *(
        ("planmode.state.models", n)
        for n in (
            "Plan",
            "Step",
            "StepStatus",
            "Complexity",
            "PatchRecord",
            "Rejection",
            "PlanPatch",
            "NewStep",
            "StepUpdate",
            "StepTransition",
            "ResetPlan",
            "StepDefinition",
        )
    ),
    ("planmode.state.reducer", "PlanUpdate"),
    ("planmode.state.graph_state", "StepOutcome"),
)


#: The PostgreSQL advisory lock key under which LangGraph's checkpoint tables are created (any fixed number).
_SETUP_LOCK = 0x706C616E6D6F6465  # "planmode"


def planmode_serializer() -> JsonPlusSerializer:
    """LangGraph's serializer with planmode's types allowed explicitly."""
    return JsonPlusSerializer(allowed_msgpack_modules=SERDE_ALLOWLIST)


def sqlite_checkpointer(path: str | Path) -> SqliteSaver:
    """A `SqliteSaver` on one file (created with its folder), safe to share across threads, in WAL mode, that
    syncs the file once per checkpoint (`planmode.persistence._sqlite_saver.SqliteCheckpointSaver`).

    Raises `ConfigurationError` with a clear message when the file cannot be opened or written.
    """
    p = Path(path).expanduser()
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(p), check_same_thread=False, timeout=30)
        _use_wal(conn)
        saver = SqliteCheckpointSaver(conn, serde=planmode_serializer())  # one fsync per checkpoint
        saver.setup()
    except (OSError, sqlite3.Error) as exc:
        raise ConfigurationError(f"cannot use database file {str(p)!r}: {exc}") from exc
    return saver


def with_planmode_types(checkpointer: _T) -> _T:
    """``checkpointer`` with planmode's types added to its serializer's allowlist (when it has one), for
    checkpoints written before they were JSON data; new checkpoints need nothing of it."""
    if checkpointer is None or isinstance(checkpointer, bool) or not hasattr(checkpointer, "with_allowlist"):
        return checkpointer
    return cast("_T", checkpointer.with_allowlist(SERDE_ALLOWLIST))  # the same kind of saver


@asynccontextmanager
async def server_checkpointer() -> AsyncIterator[Any]:
    """The LangGraph server's checkpointer, for ``langgraph.json``'s ``checkpointer.path``, with planmode's
    types registered with its serializer. ``PLANMODE_SERVER_DB`` names where it keeps its checkpoints:

    - a SQLite file (default ``.langgraph_api/planmode.sqlite``, relative to where ``langgraph dev`` runs):
      an `AsyncSqliteSaver`;
    - a ``postgresql://`` URL: an ``AsyncPostgresSaver`` on a connection pool (the ``postgres`` extra).

    The server enters it once at start-up and closes it at shutdown. Nothing here blocks the event loop
    (the server's blocking-call detector and ``BG_JOB_ISOLATED_LOOPS=true`` refuse that): the folder is
    made and the file is opened in worker threads.
    """
    target = os.environ.get(SERVER_DB_ENV) or _SERVER_DB_DEFAULT
    if target.startswith(("postgres://", "postgresql://")):
        async with _async_postgres_checkpointer(target) as pg_saver:
            yield pg_saver
        return
    async with async_sqlite_checkpointer(target, env=SERVER_DB_ENV) as saver:
        yield saver


@asynccontextmanager
async def async_sqlite_checkpointer(path: str | Path, *, env: str | None = None) -> AsyncIterator[AsyncSqliteSaver]:
    """An `AsyncSqliteSaver` on one file (created with its folder, in WAL mode), closed on exit.

    The file-system work runs in a worker thread, so this is safe on a running event loop. Raises
    `ConfigurationError` when the file cannot be opened or written (``env``: the variable that named it).
    """
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    named = f" ({env})" if env else ""

    def prepare() -> Path:
        p = Path(path).expanduser()
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    try:
        p = await asyncio.to_thread(prepare)
        conn = await aiosqlite.connect(str(p), timeout=30)
    except (OSError, sqlite3.Error) as exc:
        raise ConfigurationError(f"cannot use database file {str(path)!r}{named}: {exc}") from exc
    try:
        try:
            await conn.execute("PRAGMA journal_mode=WAL")
            saver = announcing(fenced_async(AsyncSqliteSaver))(conn, serde=planmode_serializer())
            await saver.setup()
        except sqlite3.Error as exc:
            raise ConfigurationError(f"cannot use database file {str(p)!r}{named}: {exc}") from exc
        yield saver
    finally:
        await conn.close()


@asynccontextmanager
async def _async_postgres_checkpointer(
    url: str, *, max_connections: int = 10, env: str | None = SERVER_DB_ENV
) -> AsyncIterator[Any]:
    """An ``AsyncPostgresSaver`` on an async connection pool, closed on exit (the ``postgres`` extra).
    ``env``: the variable that named the URL, for error messages."""
    named = f" ({env})" if env else ""
    try:
        # a first import of psycopg runs ldconfig in a subprocess (to find libpq): not on the event loop
        await asyncio.to_thread(importlib.import_module, "planmode.persistence._pg_fence")  # imports langgraph's .aio
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        from planmode.persistence._pg_fence import FencedAsyncPostgresSaver
    except ImportError as exc:  # the optional extra is missing
        raise ConfigurationError("PostgreSQL needs the postgres extra: pip install 'planmode[postgres]'") from exc
    import psycopg

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    pool: Any = AsyncConnectionPool(url, kwargs=kwargs, min_size=1, max_size=max_connections, open=False)
    try:
        try:
            await pool.open(wait=True, timeout=10)
            saver = announcing(FencedAsyncPostgresSaver)(pool, serde=planmode_serializer())
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as lock:  # as the sync saver
                deadline = time.monotonic() + 60
                while not (await (await lock.execute("SELECT pg_try_advisory_lock(%s)", (_SETUP_LOCK,))).fetchone())[0]:  # type: ignore[index]  # one row
                    if time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.05)
                try:
                    await saver.setup()
                finally:
                    await lock.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))
        except (psycopg.Error, OSError) as exc:
            raise ConfigurationError(f"cannot use PostgreSQL at {_redact(url)}{named}: {exc}") from exc
        except Exception as exc:  # psycopg_pool.PoolTimeout and friends: say which database, not a traceback
            raise ConfigurationError(f"cannot connect to PostgreSQL at {_redact(url)}{named}: {exc}") from exc
        yield saver
    finally:
        await pool.close()


def _use_wal(conn: sqlite3.Connection, *, wait: float = 30.0) -> None:
    """Put the file in WAL mode (it stays so), so readers do not block the writer.

    Switching needs a moment alone with the file, and SQLite answers "database is locked" at once — without
    its busy timeout — while another process is setting up the same new file; so retry, bounded by ``wait``.
    A file already in WAL mode needs no switch.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def postgres_checkpointer(url: str, *, max_connections: int = 10) -> FencedPostgresSaver:
    """A ``PostgresSaver`` on a connection pool (the ``postgres`` extra: ``pip install 'planmode[postgres]'``).

    The same interface as the SQLite checkpointer; for runs shared by several processes or machines (a LangGraph
    server with PostgreSQL is the path beyond one machine). The pool is closed with ``saver.conn.close()``.
    """
    try:
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        from planmode.persistence._pg_fence import FencedPostgresSaver
    except ImportError as exc:  # the optional extra is missing
        raise ConfigurationError("PostgreSQL needs the postgres extra: pip install 'planmode[postgres]'") from exc
    import psycopg

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    try:
        pool: Any = ConnectionPool(url, kwargs=kwargs, min_size=1, max_size=max_connections, open=False)
        pool.open(wait=True, timeout=10)
        saver = FencedPostgresSaver(pool, serde=planmode_serializer())
        # Processes starting at once on a new database would race to create LangGraph's tables (a duplicate
        # migration row): one at a time, under a PostgreSQL advisory lock held on a connection of its own.
        with psycopg.connect(url, autocommit=True) as lock:
            # try-and-sleep, not a blocking pg_advisory_lock: a waiter blocked in that statement holds a
            # transaction open, and the holder's CREATE INDEX CONCURRENTLY would wait for it (a deadlock)
            deadline = time.monotonic() + 60
            while not lock.execute("SELECT pg_try_advisory_lock(%s)", (_SETUP_LOCK,)).fetchone()[0]:  # type: ignore[index]  # one row
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            try:
                saver.setup()
            finally:
                lock.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))
    except (psycopg.Error, OSError) as exc:
        raise ConfigurationError(f"cannot use PostgreSQL at {_redact(url)}: {exc}") from exc
    except Exception as exc:  # psycopg_pool.PoolTimeout and friends: say which database, not a traceback
        raise ConfigurationError(f"cannot connect to PostgreSQL at {_redact(url)}: {exc}") from exc
    return saver


def open_checkpointer(target: str | Path) -> SqliteSaver | FencedPostgresSaver:
    """A checkpointer for ``target``: a ``postgresql://`` URL, or a SQLite file path (the default)."""
    text = str(target)
    if text.startswith(("postgres://", "postgresql://")):
        return postgres_checkpointer(text)
    return sqlite_checkpointer(text)


def async_postgres_checkpointer(url: str, *, max_connections: int = 10) -> AbstractAsyncContextManager[Any]:
    """An ``AsyncPostgresSaver`` on an async connection pool (the ``postgres`` extra), closed on exit::

        async with async_postgres_checkpointer("postgresql://...") as saver: ...

    Nothing in it blocks the event loop; `ConfigurationError` when the database cannot be used."""
    return _async_postgres_checkpointer(url, max_connections=max_connections, env=None)


def aopen_checkpointer(target: str | Path) -> AbstractAsyncContextManager[Any]:
    """`open_checkpointer` for async code: an ``AsyncPostgresSaver`` for a ``postgresql://`` URL, else an
    ``AsyncSqliteSaver`` on the file (made with its folder in a worker thread), closed on exit::

        async with aopen_checkpointer("runs.sqlite") as saver:
            graph = build_graph(checkpointer=saver)
            await planmode.arun(graph, input, config)
    """
    text = str(target)
    if text.startswith(("postgres://", "postgresql://")):
        return async_postgres_checkpointer(text)
    return async_sqlite_checkpointer(target)


def _redact(url: str) -> str:
    """``url`` without its password."""
    import re

    return re.sub(r"(//[^:/@]+):[^@]*@", r"\1:***@", url)


# -- durability ------------------------------------------------------------------------------------------


def wait_until_durable(*, timeout: float = 120.0) -> None:
    """Block the calling node until the checkpoint its task runs from is saved.

    LangGraph's default durability ("async") saves each checkpoint in the background while the next
    super-step already runs; a process killed meanwhile loses the steps that checkpoint recorded done, and
    runs them again on resume. execute_step calls this before its step starts (once some step is done), so
    every step verified done is durable before a step that depends on it starts — whatever durability the
    caller passed, except "exit" (the caller asked for no checkpoint before the run ends; nothing is durable
    then by design). Outside a run, without a checkpointer, or under "sync" (the checkpoint is already there:
    one cheap query) it returns at once.

    Raises:
        TimeoutError: the checkpoint was not saved within ``timeout`` seconds (the saver is failing).
    """
    target = _durability_target()
    if target is None:
        return
    saver, key = target
    # a saver that announces its saves (`SqliteCheckpointSaver`) wakes the wait when it saved the checkpoint
    announced = bool(getattr(saver, "announces_saves", False))
    if announced and SAVES.wait_saved(key, 0):
        return
    lease = current_lease(None)  # a write refused by the lease's fence: that checkpoint never comes
    deadline = time.monotonic() + timeout
    pause = 0.0005
    while not _checkpoint_saved(saver, key):
        if lease is not None and lease.lost:
            raise LeaseLostError(lease.thread_id, lease.epoch)
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"checkpoint {key[2]} of thread {key[0]!r} was not saved within {timeout:.0f} s; "
                "the checkpointer is failing"
            )
        if announced:  # woken by the announcement; the database is asked again now and then (another process)
            if SAVES.wait_saved(key, _ANNOUNCED_RECHECK):
                return
        else:
            time.sleep(pause)
            pause = min(pause * 2, 0.02)


def _durability_target() -> tuple[Any, tuple[str, str, str]] | None:
    """(saver, (thread, namespace, checkpoint id)) of the checkpoint the current task runs from, or None when
    there is nothing to wait for (see `wait_until_durable`)."""
    from langgraph.config import get_config

    from planmode._compat import (
        CONFIG_KEY_CHECKPOINT_MAP,
        CONFIG_KEY_CHECKPOINT_NS,
        CONFIG_KEY_CHECKPOINTER,
        CONFIG_KEY_DURABILITY,
        NS_SEP,
    )

    try:
        conf = get_config().get("configurable") or {}
    except RuntimeError:  # not inside a run
        return None
    saver = conf.get(CONFIG_KEY_CHECKPOINTER)
    if saver is None or conf.get(CONFIG_KEY_DURABILITY) == "exit" or not conf.get("thread_id"):
        return None
    task_ns = str(conf.get(CONFIG_KEY_CHECKPOINT_NS) or "")
    graph_ns = task_ns.rpartition(NS_SEP)[0]
    checkpoint_id = (conf.get(CONFIG_KEY_CHECKPOINT_MAP) or {}).get(graph_ns)
    if not checkpoint_id:
        return None
    return saver, (str(conf["thread_id"]), graph_ns, str(checkpoint_id))


async def await_until_durable(*, timeout: float = 120.0) -> None:
    """`wait_until_durable` for async nodes: the same wait, without blocking the event loop.

    A saver made by planmode (`async_sqlite_checkpointer`, `async_postgres_checkpointer`, `server_checkpointer`)
    announces each checkpoint it saves (`planmode.persistence._saves`): the wait returns as soon as that checkpoint is
    announced, and asks the database (one indexed query) at the start and then every quarter second, for a
    checkpoint saved by another process. Other async savers are asked with ``aget_tuple``, sync-only ones in
    a worker thread, with a short backoff.

    Raises:
        TimeoutError: the checkpoint was not saved within ``timeout`` seconds (the saver is failing).
    """
    target = _durability_target()
    if target is None:
        return
    saver, key = target
    announced = bool(getattr(saver, "announces_saves", False))
    if announced:
        saver = saver.announcing_saver()  # the saver itself, under a wrapper such as the LangGraph server's
    future = SAVES.watch(key) if announced else None
    if announced and future is None:  # announced already
        return
    lease = current_lease(None)  # as in wait_until_durable
    deadline = time.monotonic() + timeout
    pause = 0.0005
    try:
        while not await _acheckpoint_saved(saver, key):
            if lease is not None and lease.lost:
                raise LeaseLostError(lease.thread_id, lease.epoch)
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"checkpoint {key[2]} of thread {key[0]!r} was not saved within {timeout:.0f} s; "
                    "the checkpointer is failing"
                )
            if future is None:
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.02)
            elif (await asyncio.wait({future}, timeout=_ANNOUNCED_RECHECK))[0]:
                return
    finally:
        if future is not None:
            SAVES.unwatch(key, future)


#: Seconds between two database checks while waiting for an announced save.
_ANNOUNCED_RECHECK = 0.25
#: The announcing subclass of each saver class (`announcing`).
_ANNOUNCING: dict[type, type] = {}


def announcing(saver_class: type[_T]) -> type[_T]:
    """The subclass of an async saver class that announces each checkpoint it saves (`planmode.persistence._saves`)."""
    made = _ANNOUNCING.get(saver_class)
    if made is None:
        made = type(f"Announcing{saver_class.__name__}", (Announcing, saver_class), {"__module__": __name__})
        _ANNOUNCING[saver_class] = made
    return cast("type[_T]", made)  # a subclass of saver_class


async def _acheckpoint_saved(saver: Any, key: tuple[str, str, str]) -> bool:
    """`_checkpoint_saved` from an event loop: one indexed query on the async savers planmode ships with
    (under the saver's lock, as its own queries), ``aget_tuple`` on others, the sync check in a worker thread
    for a sync saver."""
    if is_async_sqlite(saver):
        async with saver.lock, saver.conn.execute(_SAVED_SQL, key) as cur:
            return await cur.fetchone() is not None
    if is_async_postgres(saver):
        async with apg_connection(saver) as conn, conn.cursor() as cur:
            await cur.execute(_SAVED_SQL.replace("?", "%s"), key)
            return await cur.fetchone() is not None
    if isinstance(saver, SqliteSaver) or is_postgres(saver):  # sync-only savers: their one indexed query
        return await asyncio.to_thread(_checkpoint_saved, saver, key)
    config = {"configurable": {"thread_id": key[0], "checkpoint_ns": key[1], "checkpoint_id": key[2]}}
    try:
        found = await saver.aget_tuple(config)
    except NotImplementedError:  # a sync-only saver of another kind
        return await asyncio.to_thread(_checkpoint_saved, saver, key)
    return found is not None


_SAVED_SQL = "SELECT 1 FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"


def _checkpoint_saved(saver: Any, key: tuple[str, str, str]) -> bool:
    """Whether the checkpoint (thread, namespace, id) is in the saver: one indexed query for the savers
    planmode ships with, ``get_tuple`` for the others."""
    if isinstance(saver, SqliteSaver):
        with saver.cursor(transaction=False) as cur:
            cur.execute(
                "SELECT 1 FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?", key
            )
            return cur.fetchone() is not None
    if is_postgres(saver):
        with pg_connection(saver) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT 1 FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s", key
            )
            return cur.fetchone() is not None
    try:
        found = saver.get_tuple(
            {"configurable": {"thread_id": key[0], "checkpoint_ns": key[1], "checkpoint_id": key[2]}}
        )
    except NotImplementedError:  # an async-only saver: it cannot be asked from here
        return True
    return found is not None
