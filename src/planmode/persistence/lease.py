"""One process runs a thread at a time: a per-thread lease kept in the checkpoint database.

    from planmode import run
    result = run(graph, {"messages": [("user", "...")]}, {"configurable": {"thread_id": "t1"}})

    # or around your own invoke/stream calls:
    with thread_lease(saver, "t1"):
        for chunk in graph.stream(None, config):
            ...

A second holder gets `ThreadBusyError`: "thread 't1' is already running (host:pid, since ...)". The lease is
a row in the table ``planmode_leases`` of the checkpoint database (created on first use, idempotently): the
holder (``host:pid``), a random token, when it was taken, and a heartbeat with an expiry that a background
thread renews every ``ttl / 3`` seconds. A lease is taken over without manual cleanup when its holder is
gone: at once when the holder ran on this host and its process is dead (or its pid now belongs to another
process), otherwise once its heartbeat has expired (``ttl`` seconds; default 30).

Fencing (the fencing-token pattern). A holder stopped past its expiry (Ctrl-Z, SIGSTOP, a paused VM) is
taken over while alive, and continues when it is resumed. So every acquisition increments the row's ``epoch``
(a released lease keeps its row, without a holder, so the epoch only grows), the holder knows its epoch and
token, and every checkpoint write its graph makes (``put``, ``put_writes`` and their async twins) checks, in
the same statement or transaction, that the row still carries them: on SQLite a temporary trigger on the
lease's connection (and on planmode's savers) refuses the insert; on PostgreSQL the savers
`planmode.persistence` makes read the row ``FOR SHARE`` in the write's transaction. A refused write raises
`LeaseLostError` and changes nothing: the new holder's checkpoints stay intact and readable. execute_step calls
`assert_lease_held` before a step starts: a lease known lost is refused at once, one not renewed for half its
ttl is renewed in the database first. Writes made without a lease held in this process (a plain
``graph.invoke``, a LangGraph server) are not fenced. A step already running when the process was stopped may
finish its own side effect; nothing after it is written or started.

Async code: `arun`, `astream`, `athread_lease` and `aassert_lease_held` hold the same row in the same table, so
a sync process and an async one exclude each other on one database, and fence the same way. On an async saver
(``AsyncSqliteSaver``, ``AsyncPostgresSaver``) the lease is taken, renewed (an asyncio task every ``ttl / 3``
seconds) and released through the saver's own connection, under its lock, never blocking the event loop; the
few file reads that tell a dead holder (``/proc``) run in a worker thread. A sync saver given to them is leased
in a worker thread.

One body, two drivers (as `planmode._drive` does for nodes): what a store does (`_SqlStore.acquiring`,
``renewing``, ``releasing``, the heartbeat `_beating`) is written once, as a generator that yields what it
needs done (`_Tx`: statements in one write transaction; `_Sql`: one statement; `_Off`: a blocking call that is
no statement; `_Wait`: the heartbeat's pause); `_run` answers on the calling thread, `_arun` on the event loop.

Supported checkpointers: ``SqliteSaver`` and ``PostgresSaver`` and their async twins (the lease is shared by
every process using the database), and any other saver (``InMemorySaver``...) with a lease local to this
process, which is all such a saver can share. A LangGraph server (``langgraph dev``, LangGraph Platform) already
runs one run per thread at a time and needs none of this.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, ClassVar, Literal, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from planmode._drive import adrive, drive
from planmode.errors import ConfigurationError, LeaseLostError, ThreadBusyError
from planmode.persistence._savers import apg_connection, is_async_postgres, is_async_sqlite, is_postgres, pg_connection
from planmode.persistence.rows import HOST as _HOST
from planmode.persistence.rows import LEASE_TABLE
from planmode.persistence.rows import holder_dead as _dead
from planmode.persistence.rows import proc_start as _proc_start

__all__ = [
    "LEASE_TABLE",
    "LEASE_TTL",
    "ThreadLease",
    "aassert_lease_held",
    "arun",
    "assert_lease_held",
    "astream",
    "athread_lease",
    "run",
    "stream",
    "thread_lease",
]

log = logging.getLogger(__name__)

#: Seconds after the last heartbeat at which another process may take a lease over.
LEASE_TTL = 30.0

_COLUMNS = "thread_id, holder, host, pid, proc_start, token, since, heartbeat, expires, epoch"
T = TypeVar("T")
#: A store's work, written once for both paths: a generator of requests (`_Tx`, `_Sql`, `_Off`, `_Wait`).
Steps = Generator[Any, Any, T]


@dataclass
class ThreadLease:
    """A lease held on one thread (see the module docstring)."""

    thread_id: str
    holder: str
    """``host:pid`` of the holding process."""
    token: str
    """Random: tells this lease from any other held by the same process."""
    since: datetime
    ttl: float
    taken_over: str | None = None
    """The holder whose stale lease this one replaced (a process that died), if any."""
    lost: bool = False
    """True when a heartbeat found the lease gone (taken over after it expired), or a write was refused."""
    epoch: int = 0
    """The fencing token: every acquisition of the thread's lease increments it; this holder's writes carry it."""
    db: str = field(default="", repr=False)
    """Which database the lease is kept in (empty: a lease local to this process, never fenced)."""
    renewed: float = field(default_factory=time.monotonic, repr=False)
    """`time.monotonic` when the database last confirmed the lease (taken before the statement ran)."""
    _store: Any = field(default=None, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def fence(self) -> str:
        """``epoch:token``, as the fence compares it with the lease row."""
        return f"{self.epoch}:{self.token}"


# -- the entry points: sync and async ------------------------------------------------------------------------


@contextmanager
def thread_lease(checkpointer: Any, thread_id: str, *, ttl: float = LEASE_TTL) -> Iterator[ThreadLease]:
    """Hold the lease of ``thread_id`` in ``checkpointer``'s database for the block.

    Raises:
        ThreadBusyError: another live process (or another block in this one) holds it.
        ConfigurationError: ``checkpointer`` is not a checkpointer, or ``ttl`` is not positive.
    """
    store = _store_for(_checked(checkpointer, ttl, "thread_lease"))
    lease = _run(store, store.acquiring(str(thread_id), ttl))
    held = hold(lease)
    beat = _beat_in_thread(store, lease)
    try:
        yield lease
    except Exception as exc:
        _raise_lost(exc, lease)
        raise
    finally:
        lease._stop.set()
        beat.join(timeout=ttl)
        _run(store, store.releasing(lease))
        unhold(lease, held)


@asynccontextmanager
async def athread_lease(checkpointer: Any, thread_id: str, *, ttl: float = LEASE_TTL) -> AsyncIterator[ThreadLease]:
    """`thread_lease` for async code: hold the lease of ``thread_id`` for the block, never blocking the event loop
    (see the module docstring).

    Raises:
        ThreadBusyError: another live process (or another block in this one) holds it.
        ConfigurationError: ``checkpointer`` is not a checkpointer, or ``ttl`` is not positive.
    """
    saver = _checked(checkpointer, ttl, "athread_lease")
    store: _Store | None = await astore_for(saver)
    if store is None:
        store = await asyncio.to_thread(_store_for, saver)  # may create the table: off the loop
    lease = await _arun(store, store.acquiring(str(thread_id), ttl))
    held = hold(lease)
    task: asyncio.Task[None] | None = None
    thread: threading.Thread | None = None
    if store.path == "async":  # on this loop, through the saver's connection
        task = asyncio.create_task(_arun(store, _beating(store, lease)), name=f"planmode-lease-{lease.thread_id}")
    else:
        thread = _beat_in_thread(store, lease)
    try:
        yield lease
    except Exception as exc:
        _raise_lost(exc, lease)
        raise
    finally:
        lease._stop.set()
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if thread is not None:
            await asyncio.to_thread(thread.join, ttl)
        await _arun(store, store.releasing(lease))
        unhold(lease, held)


def run(graph: Any, input: Any, config: Any, **kwargs: Any) -> Any:
    """``graph.invoke(input, config, **kwargs)`` while holding the thread's lease (see the module docstring).

    Raises `ThreadBusyError` when another process is running the thread; a graph without a checkpointer of
    its own runs without a lease (a LangGraph server serialises the runs of a thread itself).
    """
    saver = getattr(graph, "checkpointer", None)
    if not isinstance(saver, BaseCheckpointSaver):
        return graph.invoke(input, config, **kwargs)
    with thread_lease(saver, _thread_of(config)):
        return graph.invoke(input, config, **kwargs)


async def arun(graph: Any, input: Any, config: Any, **kwargs: Any) -> Any:
    """``await graph.ainvoke(input, config, **kwargs)`` while holding the thread's lease (`run` for async code)."""
    saver = getattr(graph, "checkpointer", None)
    if not isinstance(saver, BaseCheckpointSaver):
        return await graph.ainvoke(input, config, **kwargs)
    async with athread_lease(saver, _thread_of(config)):
        return await graph.ainvoke(input, config, **kwargs)


def stream(graph: Any, input: Any, config: Any, **kwargs: Any) -> Iterator[Any]:
    """``graph.stream(input, config, **kwargs)`` while holding the thread's lease (as `run`)."""
    saver = getattr(graph, "checkpointer", None)
    if not isinstance(saver, BaseCheckpointSaver):
        yield from graph.stream(input, config, **kwargs)
        return
    with thread_lease(saver, _thread_of(config)):
        yield from graph.stream(input, config, **kwargs)


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


def assert_lease_held(config: Any = None) -> None:
    """Raise `LeaseLostError` when this process held the lease of the run's thread and lost it; execute_step
    calls it before a step starts. Cheap: a lease renewed within half its ttl is trusted; an older one (the
    process was stopped, or its heartbeat failing) is renewed in the database first. A run without a lease in
    this process passes. ``config``: the run's config (default: the current run's)."""
    lease = _to_check(config)
    if lease is None:
        return
    store = lease._store
    if not lease.lost and store is not None and store.path != "async":  # an async store is asked by the async twin
        lease.lost = not _run(store, store.renewing(lease))
    if lease.lost:
        raise LeaseLostError(lease.thread_id, lease.epoch)


async def aassert_lease_held(config: Any = None) -> None:
    """`assert_lease_held` for async code: the database is asked (the lease renewed) without blocking the event
    loop, only when the lease was not renewed within half its ttl."""
    lease = _to_check(config)
    if lease is None:
        return
    store = lease._store
    if not lease.lost and store is not None:
        lease.lost = not await _arun(store, store.renewing(lease))
    if lease.lost:
        raise LeaseLostError(lease.thread_id, lease.epoch)


def _checked(checkpointer: Any, ttl: float, caller: str) -> BaseCheckpointSaver[Any]:
    if not isinstance(checkpointer, BaseCheckpointSaver):
        raise ConfigurationError(f"{caller} needs a checkpointer, got {type(checkpointer).__name__}")
    if not ttl > 0:
        raise ConfigurationError(f"the lease ttl must be positive, got {ttl}")
    return checkpointer


def _raise_lost(exc: Exception, lease: ThreadLease) -> None:
    """Raise the `LeaseLostError` that ``exc`` stands for (a write the SQLite fence refused), if any."""
    lost = refused_write(exc, lease.thread_id, lease)
    if lost is not None and lost is not exc:
        raise lost from exc


def _thread_of(config: Any) -> str:
    thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
    if thread_id in (None, ""):
        raise ConfigurationError("a run needs a thread id: config={'configurable': {'thread_id': ...}}")
    return str(thread_id)


def _to_check(config: Any) -> ThreadLease | None:
    """The lease of the run's thread when the database must confirm it (lost, or not renewed within half its
    ttl); None when the run passes as it is."""
    lease = current_lease(config)
    if lease is None or (not lease.lost and time.monotonic() - lease.renewed < lease.ttl / 2):
        return None
    return lease


def _beating(store: _Store, lease: ThreadLease) -> Steps[None]:
    """The heartbeat: the lease renewed every ``ttl / 3`` seconds until it is released, or found taken over."""
    while (yield _Wait(max(0.05, lease.ttl / 3), lease._stop)):
        try:
            if not (yield from store.renewing(lease)):
                lease.lost = True
                log.warning("the lease of thread %r was taken over by another process", lease.thread_id)
                return
        except Exception as exc:  # a database hiccup: the next beat tries again (the ttl leaves room)
            log.warning("could not renew the lease of thread %r: %s", lease.thread_id, exc)


def _beat_in_thread(store: _Store, lease: ThreadLease) -> threading.Thread:
    beat = threading.Thread(
        target=_run, args=(store, _beating(store, lease)), name=f"planmode-lease-{lease.thread_id}", daemon=True
    )
    beat.start()
    return beat


# -- the fence: which lease this process holds on a thread ------------------------------------------------

_held_lock = threading.Lock()
_HELD: dict[str, list[ThreadLease]] = {}  # thread id -> the leases this process holds on it (newest last)
_CURRENT: ContextVar[tuple[ThreadLease, ...]] = ContextVar("planmode_thread_leases", default=())
#: The database each saver (or lease store) writes to, once known: how a write finds the lease of its database.
DB_KEYS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
#: In the message of a write the SQLite fence refused (its trigger's RAISE).
FENCE_MARK = "planmode: lease lost"


def hold(lease: ThreadLease) -> Token[tuple[ThreadLease, ...]] | None:
    """Register a lease kept in a database, so that the writes of this process on its thread are fenced."""
    if not lease.db:
        return None  # a lease local to this process: nobody can take it over
    with _held_lock:
        _HELD.setdefault(lease.thread_id, []).append(lease)
    return _CURRENT.set((*_CURRENT.get(), lease))


def unhold(lease: ThreadLease, token: Token[tuple[ThreadLease, ...]] | None) -> None:
    """Undo `hold`."""
    if token is None:
        return
    with _held_lock:
        leases = _HELD.get(lease.thread_id, [])
        if lease in leases:
            leases.remove(lease)
        if not leases:
            _HELD.pop(lease.thread_id, None)
    try:
        _CURRENT.reset(token)
    except ValueError:  # left in another context (an async generator closed elsewhere)
        _CURRENT.set(tuple(x for x in _CURRENT.get() if x is not lease))


def may_hold(thread_id: str) -> bool:
    """Whether this process holds a lease on ``thread_id`` in some database (one dictionary look-up)."""
    return thread_id in _HELD or any(x.thread_id == thread_id for x in _CURRENT.get())


def held_lease(db: str | None, thread_id: str) -> ThreadLease | None:
    """The lease this process holds on ``thread_id`` in database ``db`` (None: in any), the one entered in this
    context first (a takeover within one process leaves two), else the newest."""
    for lease in reversed(_CURRENT.get()):
        if lease.thread_id == thread_id and (db is None or lease.db == db):
            return lease
    with _held_lock:
        for lease in reversed(_HELD.get(thread_id, ())):
            if db is None or lease.db == db:
                return lease
    return None


def refused_write(exc: BaseException, thread_id: str, lease: ThreadLease | None = None) -> LeaseLostError | None:
    """The `LeaseLostError` that ``exc`` is (or was caused by: the SQLite fence's refusal), else None."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, LeaseLostError):
            return seen
        if FENCE_MARK in str(seen):
            lease = lease or held_lease(None, thread_id)
            if lease is not None:
                lease.lost = True
            return LeaseLostError(thread_id, lease.epoch if lease is not None else 0)
        seen = seen.__cause__ or seen.__context__
    return None


def check_fence(lease: ThreadLease, row: Any) -> None:
    """Raise `LeaseLostError` unless ``row`` (``epoch, token, holder`` of the lease row) is still ``lease``'s."""
    values = _plain(row) if row is not None else None
    if values is not None and int(values[0] or 0) == lease.epoch and values[1] == lease.token:
        return
    lease.lost = True
    holder = str(values[2]) if values is not None and values[1] else None
    raise LeaseLostError(lease.thread_id, lease.epoch, holder=holder)


#: The lease row as the fence reads it (PostgreSQL: locked against a takeover until the write commits).
FENCE_SQL = f"SELECT epoch, token, holder FROM {LEASE_TABLE} WHERE thread_id = ? FOR SHARE"


def current_lease(config: Any) -> ThreadLease | None:
    """The lease this process holds on the thread of ``config`` (the current run's when None), if any."""
    if config is None:
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:  # not inside a run
            return None
    conf = (config or {}).get("configurable") or {}
    thread_id = conf.get("thread_id")
    if thread_id in (None, "") or not may_hold(str(thread_id)):
        return None
    from planmode._compat import CONFIG_KEY_CHECKPOINTER

    saver = conf.get(CONFIG_KEY_CHECKPOINTER)
    try:
        db = DB_KEYS.get(saver) if saver is not None else None
    except TypeError:  # not weakly referable
        db = None
    return held_lease(db, str(thread_id))


# -- who holds it ----------------------------------------------------------------------------------------
# _HOST, _proc_start and _dead (whether a holder on this host is certainly gone) live in planmode.persistence.rows,
# which ``planmode ls`` reads without LangGraph.


# -- where it is kept: the statements (``?`` placeholders; ``%s`` for PostgreSQL) ----------------------------


def create_sql(postgres: bool) -> str:
    """The lease table, created idempotently."""
    real = "DOUBLE PRECISION" if postgres else "REAL"
    return (
        f"CREATE TABLE IF NOT EXISTS {LEASE_TABLE} (thread_id TEXT PRIMARY KEY, holder TEXT NOT NULL, "
        f"host TEXT NOT NULL, pid INTEGER NOT NULL, proc_start TEXT, token TEXT NOT NULL, "
        f"since {real} NOT NULL, heartbeat {real} NOT NULL, expires {real} NOT NULL, "
        "epoch INTEGER NOT NULL DEFAULT 0)"
    )


def columns_sql(postgres: bool) -> str:
    """The column names of the lease table (to migrate a table made before the epoch)."""
    if postgres:
        return (
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            f"AND table_name = '{LEASE_TABLE}'"
        )
    return f"SELECT name FROM pragma_table_info('{LEASE_TABLE}')"


#: Adds the fencing epoch to a lease table made before it.
ADD_EPOCH_SQL = f"ALTER TABLE {LEASE_TABLE} ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0"
#: Names the database a PostgreSQL connection is on (which server instance, which database).
PG_DB_SQL = "SELECT current_database(), inet_server_port(), pg_postmaster_start_time()::text"
#: Names the file a SQLite connection is on.
SQLITE_DB_SQL = "PRAGMA database_list"


def pg_db_key(row: Any) -> str:
    """The key of a PostgreSQL database from `PG_DB_SQL`'s row."""
    return "postgres:" + "|".join(str(v) for v in _plain(row))


def sqlite_db_key(rows: Any, conn: Any) -> str:
    """The key of a SQLite database from `SQLITE_DB_SQL`'s rows (an in-memory one: its connection's)."""
    for row in rows:
        values = _plain(row)
        if values[1] == "main":
            return f"sqlite:{values[2]}" if values[2] else f"sqlite-memory:{id(conn)}"
    return f"sqlite-memory:{id(conn)}"


#: The SQLite function the fence's triggers call: the ``epoch:token`` this process holds on a thread, or NULL.
FENCE_FUNCTION = "planmode_fence"


def sqlite_fence_function(db: str) -> Callable[[object], str | None]:
    """`FENCE_FUNCTION` for a connection on database ``db``."""

    def fence(thread_id: Any) -> str | None:
        lease = held_lease(db, str(thread_id))
        return None if lease is None else lease.fence

    return fence


def sqlite_fence_sql(table: str) -> str:
    """The temporary trigger that refuses an insert into ``table`` (``checkpoints``, ``writes``) of a thread whose
    lease this process held and lost, in the insert's own statement. ``RAISE(ROLLBACK)`` ends the transaction:
    nothing of it is written, and no lock is kept that would hold up the new holder."""
    return (
        f"CREATE TEMP TRIGGER IF NOT EXISTS planmode_fence_{table} BEFORE INSERT ON main.{table} "
        f"WHEN {FENCE_FUNCTION}(NEW.thread_id) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM main.{LEASE_TABLE} AS l "
        f"WHERE l.thread_id = NEW.thread_id AND l.token <> '' "
        f"AND (l.epoch || ':' || l.token) = {FENCE_FUNCTION}(NEW.thread_id)) "
        f"BEGIN SELECT RAISE(ROLLBACK, '{FENCE_MARK}: another process took this thread over'); END"
    )


FENCED_TABLES = ("checkpoints", "writes")


def install_sqlite_fence(saver: Any) -> None:
    """Fence the writes made through a `SqliteSaver`'s connection (see the module docstring); idempotent: the
    lease table and the fence are made once per saver object, with its store."""
    _store_for(saver)


def select_sql(postgres: bool) -> str:
    """The current holder of a thread's lease (locked for the transaction on PostgreSQL)."""
    lock = " FOR UPDATE" if postgres else ""
    return (
        f"SELECT holder, host, pid, proc_start, since, expires, token, epoch FROM {LEASE_TABLE} "
        f"WHERE thread_id = ?{lock}"
    )


INSERT_SQL = (
    f"INSERT INTO {LEASE_TABLE} ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT (thread_id) DO NOTHING"
)
TAKEOVER_SQL = (
    f"UPDATE {LEASE_TABLE} SET holder = ?, host = ?, pid = ?, proc_start = ?, token = ?, since = ?, "
    "heartbeat = ?, expires = ?, epoch = ? WHERE thread_id = ?"
)
RENEW_SQL = f"UPDATE {LEASE_TABLE} SET heartbeat = ?, expires = ? WHERE thread_id = ? AND token = ?"
#: A released lease keeps its row, with no holder (an empty token), so that the next epoch is higher still.
RELEASE_SQL = f"UPDATE {LEASE_TABLE} SET token = '', expires = 0 WHERE thread_id = ? AND token = ?"


# -- what a store asks its driver for ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Sql:
    """One statement, inside a `_Tx`: answered with its row (``fetch="one"``), its rows (``"all"``), the number
    of rows it changed (``"count"``), or None."""

    sql: str
    params: tuple[Any, ...] = ()
    fetch: Literal["one", "all", "count", ""] = ""


@dataclass(frozen=True, slots=True)
class _Tx:
    """Statements in one write transaction on the saver's connection, under its lock: ``steps`` yields `_Sql` (and
    `_Off`) and returns the answer, or is one `_Sql`, answered. An exception in it rolls the transaction back."""

    steps: Steps[Any] | _Sql


@dataclass(frozen=True, slots=True)
class _Off:
    """A blocking call that is no statement (a ``/proc`` read): made as it is on the sync path, in a worker thread
    on the async path (a lease local to this process does no I/O: on the loop)."""

    call: Callable[[], Any]


@dataclass(frozen=True, slots=True)
class _Wait:
    """The heartbeat's pause: answered True to beat again, False once ``stop`` is set (the lease released)."""

    seconds: float
    stop: threading.Event


@dataclass(frozen=True, slots=True)
class _Fence:
    """A SQLite saver's own tables set up (the fence's triggers watch them) and `FENCE_FUNCTION` made on its
    connection for database ``db``."""

    db: str


# -- the stores: one body ----------------------------------------------------------------------------------


class _Store:
    """Where leases are kept. ``path``: how its requests are answered (`_run`, `_arun`)."""

    path: ClassVar[Literal["local", "sync", "async"]] = "local"

    def acquiring(self, thread_id: str, ttl: float) -> Steps[ThreadLease]:
        raise NotImplementedError

    def renewing(self, lease: ThreadLease) -> Steps[bool]:
        raise NotImplementedError

    def releasing(self, lease: ThreadLease) -> Steps[None]:
        raise NotImplementedError


def _new_lease(thread_id: str, ttl: float) -> tuple[ThreadLease, tuple[Any, ...]]:
    now = time.time()
    pid = os.getpid()
    lease = ThreadLease(
        thread_id=thread_id,
        holder=f"{_HOST}:{pid}",
        token=secrets.token_hex(16),
        since=datetime.fromtimestamp(now, UTC),
        ttl=ttl,
        renewed=time.monotonic(),
    )
    return lease, (thread_id, lease.holder, _HOST, pid, _proc_start(pid), lease.token, now, now, now + ttl)


def _decide(lease: ThreadLease, row: Any) -> None:
    """Take ``row``'s lease (released, or its holder gone) with the next epoch, else raise `ThreadBusyError`."""
    holder, host, pid, proc_start, since, expires, token, epoch = row
    lease.epoch = int(epoch or 0) + 1
    if not token:  # released
        return
    if float(expires) < time.time() or _dead(str(host), int(pid), proc_start):
        lease.taken_over = str(holder)
        return
    raise ThreadBusyError(lease.thread_id, str(holder), datetime.fromtimestamp(float(since), UTC))


class _SqlStore(_Store):
    """The lease table in a SQLite file or a PostgreSQL database, through a sync saver's connection (sqlite3,
    psycopg); `_AsyncSqlStore` through an async saver's."""

    path: ClassVar[Literal["local", "sync", "async"]] = "sync"

    def __init__(self, saver: Any, postgres: bool) -> None:
        self.saver = saver
        self.postgres = postgres
        self.db = ""
        self.ready = False

    def preparing(self) -> Steps[None]:
        """The table, or the epoch added to one made before it; which database this is; on SQLite, the fence."""
        try:
            yield _Tx(self._prepared())
        except Exception:
            # PostgreSQL's CREATE TABLE IF NOT EXISTS can fail when another process creates the same table at
            # that moment (a unique violation in its catalog): then the table exists, and once more is a no-op.
            yield _Tx(self._prepared())
        if not self.postgres:
            yield _Fence(self.db)
            yield _Tx(self._fenced())
        DB_KEYS[self.saver] = self.db
        self.ready = True

    def _prepared(self) -> Steps[None]:
        yield _Sql(create_sql(self.postgres))
        rows = yield _Sql(columns_sql(self.postgres), fetch="all")
        if "epoch" not in {_plain(r)[0] for r in rows}:
            yield _Sql(ADD_EPOCH_SQL)
        if self.postgres:
            self.db = pg_db_key((yield _Sql(PG_DB_SQL, fetch="one")))
        else:
            self.db = sqlite_db_key((yield _Sql(SQLITE_DB_SQL, fetch="all")), self.saver.conn)

    def _fenced(self) -> Steps[None]:
        for table in FENCED_TABLES:
            yield _Sql(sqlite_fence_sql(table))

    def acquiring(self, thread_id: str, ttl: float) -> Steps[ThreadLease]:
        made: tuple[ThreadLease, tuple[Any, ...]] = yield _Off(partial(_new_lease, thread_id, ttl))  # reads /proc
        lease, values = made
        lease.db, lease._store = self.db, self
        yield _Tx(self._taking(lease, values))
        if lease.taken_over is not None:
            log.info("took over the lease of thread %r from %s (gone)", thread_id, lease.taken_over)
        return lease

    def _taking(self, lease: ThreadLease, values: tuple[Any, ...]) -> Steps[None]:
        if (yield _Sql(INSERT_SQL, values, fetch="count")) == 1:
            lease.epoch = 1
            return
        row = yield _Sql(select_sql(self.postgres), (lease.thread_id,), fetch="one")
        yield _Off(partial(_decide, lease, _plain(row)))  # is the holder alive? (/proc again)
        yield _Sql(TAKEOVER_SQL, (*values[1:], lease.epoch, lease.thread_id))

    def renewing(self, lease: ThreadLease) -> Steps[bool]:
        began = time.monotonic()
        now = time.time()
        count = yield _Tx(_Sql(RENEW_SQL, (now, now + lease.ttl, lease.thread_id, lease.token), "count"))
        renewed = bool(count == 1)
        if renewed:
            lease.renewed = began
        return renewed

    def releasing(self, lease: ThreadLease) -> Steps[None]:
        try:
            yield _Tx(_Sql(RELEASE_SQL, (lease.thread_id, lease.token)))
        except Exception as exc:  # the database is gone: the lease expires on its own
            log.warning("could not release the lease of thread %r: %s", lease.thread_id, exc)

    @contextmanager
    def _transaction(self) -> Iterator[Callable[..., Any]]:
        """``execute(sql, params) -> cursor`` inside one write transaction, on the saver's connection (a pool's, or
        its one connection under its lock). On SQLite ``BEGIN IMMEDIATE``: the write lock now, so two processes
        decide one after the other."""
        with pg_connection(self.saver) if self.postgres else _locked(self.saver) as conn:
            if not self.postgres and conn.in_transaction:
                conn.commit()
            conn.execute("BEGIN" if self.postgres else "BEGIN IMMEDIATE")
            try:
                yield partial(_statement, conn, self.postgres)
            except BaseException:
                conn.rollback()
                raise
            conn.commit()


class _AsyncSqlStore(_SqlStore):
    """`_SqlStore` through an async saver's connection (aiosqlite, psycopg's async connection or pool)."""

    path = "async"

    @asynccontextmanager
    async def _transaction(  # type: ignore[override]  # the same transaction, awaited: the async driver's
        self,
    ) -> AsyncIterator[Callable[..., Awaitable[Any]]]:
        """`_SqlStore._transaction` on an async saver: ``await execute(sql, params) -> cursor``."""
        async with apg_connection(self.saver) if self.postgres else _alocked(self.saver) as conn:
            if not self.postgres and conn.in_transaction:
                await conn.commit()
            await conn.execute("BEGIN" if self.postgres else "BEGIN IMMEDIATE")
            try:
                yield partial(_astatement, conn, self.postgres)
            except BaseException:
                await conn.rollback()
                raise
            await conn.commit()


@contextmanager
def _locked(saver: Any) -> Iterator[Any]:
    with saver.lock:
        yield saver.conn


@asynccontextmanager
async def _alocked(saver: Any) -> AsyncIterator[Any]:
    async with saver.lock:  # the saver's own writes wait: none lands inside a transaction of ours
        yield saver.conn


def _statement(conn: Any, postgres: bool, sql: str, params: tuple[Any, ...] = ()) -> Any:
    return conn.execute(sql.replace("?", "%s") if postgres else sql, params)


async def _astatement(conn: Any, postgres: bool, sql: str, params: tuple[Any, ...] = ()) -> Any:
    return await conn.execute(sql.replace("?", "%s") if postgres else sql, params)


class _LocalStore(_Store):
    """Leases for a checkpointer that lives in this process only (one per saver object)."""

    _lock = threading.Lock()
    _held: ClassVar[dict[tuple[int, str], ThreadLease]] = {}  # shared by every instance, on purpose

    def __init__(self, saver: Any) -> None:
        self.key = id(saver)

    def acquiring(self, thread_id: str, ttl: float) -> Steps[ThreadLease]:
        lease: ThreadLease = yield _Off(partial(self._acquire, thread_id, ttl))
        return lease

    def _acquire(self, thread_id: str, ttl: float) -> ThreadLease:
        lease, _ = _new_lease(thread_id, ttl)
        lease._store = self
        with self._lock:
            other = self._held.get((self.key, thread_id))
            if other is not None:
                raise ThreadBusyError(thread_id, other.holder, other.since)
            self._held[(self.key, thread_id)] = lease
        return lease

    def renewing(self, lease: ThreadLease) -> Steps[bool]:
        held: bool = yield _Off(partial(self._holds, lease))
        return held

    def _holds(self, lease: ThreadLease) -> bool:
        with self._lock:
            return self._held.get((self.key, lease.thread_id)) is lease

    def releasing(self, lease: ThreadLease) -> Steps[None]:
        yield _Off(partial(self._release, lease))

    def _release(self, lease: ThreadLease) -> None:
        with self._lock:
            if self._held.get((self.key, lease.thread_id)) is lease:
                del self._held[(self.key, lease.thread_id)]


def _plain(row: Any) -> tuple[Any, ...]:
    """A row as a tuple (PostgresSaver connections return dict rows)."""
    if isinstance(row, dict):
        return tuple(row.values())
    return tuple(row)


# -- the two drivers -----------------------------------------------------------------------------------------


def _run(store: _Store, steps: Steps[T]) -> T:
    """Run a store's ``steps`` on this thread (a sync or a local store)."""
    return drive(steps, partial(_answer, store, None))


def _answer(store: Any, execute: Any, request: Any) -> Any:
    kind = type(request)
    if kind is _Sql:
        rows = execute(request.sql, request.params)
        if request.fetch == "count":
            return rows.rowcount
        return rows.fetchone() if request.fetch == "one" else rows.fetchall() if request.fetch else None
    if kind is _Tx:
        with store._transaction() as tx:
            steps = request.steps
            return _answer(store, tx, steps) if type(steps) is _Sql else drive(steps, partial(_answer, store, tx))
    if kind is _Wait:
        return not request.stop.wait(request.seconds)
    if kind is _Fence:
        with store.saver.lock:
            store.saver.setup()
            store.saver.conn.create_function(FENCE_FUNCTION, 1, sqlite_fence_function(request.db))
        return None
    return request.call()


async def _arun(store: _Store, steps: Steps[T]) -> T:
    """Run a store's ``steps`` from async code: an async store's on the loop, a sync store's in a worker thread,
    a local store's (memory only) as they are."""
    if store.path == "async":
        return await adrive(steps, partial(_aanswer, store, None))
    if store.path == "local":
        return _run(store, steps)
    return await asyncio.to_thread(_run, store, steps)


async def _aanswer(store: Any, execute: Any, request: Any) -> Any:
    kind = type(request)
    if kind is _Sql:
        rows = await execute(request.sql, request.params)
        if request.fetch == "count":
            return rows.rowcount
        return await rows.fetchone() if request.fetch == "one" else await rows.fetchall() if request.fetch else None
    if kind is _Tx:
        async with store._transaction() as tx:
            steps = request.steps
            if type(steps) is _Sql:
                return await _aanswer(store, tx, steps)
            return await adrive(steps, partial(_aanswer, store, tx))
    if kind is _Wait:
        await asyncio.sleep(request.seconds)
        return not request.stop.is_set()
    if kind is _Fence:
        await store.saver.setup()  # takes the saver's lock itself
        async with store.saver.lock:
            await store.saver.conn.create_function(FENCE_FUNCTION, 1, sqlite_fence_function(request.db))
        return None
    return await asyncio.to_thread(request.call)


_stores: weakref.WeakKeyDictionary[Any, _SqlStore] = weakref.WeakKeyDictionary()
_stores_lock = threading.Lock()


def _store_for(saver: Any) -> _Store:
    """The store of a sync saver (its table created once per saver object); a local one for another saver."""
    if isinstance(saver, SqliteSaver) or is_postgres(saver):
        with _stores_lock:
            store = _stores.get(saver)
            if store is None:
                store = _SqlStore(saver, postgres=not isinstance(saver, SqliteSaver))
                _run(store, store.preparing())
                _stores[saver] = store
            return store
    return _LocalStore(saver)


async def astore_for(saver: Any) -> _SqlStore | None:
    """Where an async saver keeps its leases (the table created once per saver object); None for another saver."""
    if is_async_sqlite(saver) or is_async_postgres(saver):
        store = _stores.get(saver)
        if store is None:
            store = _stores[saver] = _AsyncSqlStore(saver, postgres=is_async_postgres(saver))
        if not store.ready:
            await _arun(store, store.preparing())
        return store
    return None
