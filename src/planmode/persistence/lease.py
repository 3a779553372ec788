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

Supported checkpointers: ``SqliteSaver`` and ``PostgresSaver`` (the lease is shared by every process using the
database), and any other saver (``InMemorySaver``...) with a lease local to this process, which is all such a
saver can share. A LangGraph server (``langgraph dev``, LangGraph Platform) already runs one run per thread at
a time and needs none of this.
"""

from __future__ import annotations

import logging
import os
import secrets
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from planmode.errors import ConfigurationError, LeaseLostError, ThreadBusyError
from planmode.persistence._savers import is_postgres, pg_connection
from planmode.persistence.rows import HOST as _HOST
from planmode.persistence.rows import LEASE_TABLE
from planmode.persistence.rows import holder_dead as _dead
from planmode.persistence.rows import proc_start as _proc_start

__all__ = ["LEASE_TABLE", "LEASE_TTL", "ThreadLease", "assert_lease_held", "run", "stream", "thread_lease"]

log = logging.getLogger(__name__)

#: Seconds after the last heartbeat at which another process may take a lease over.
LEASE_TTL = 30.0

_COLUMNS = "thread_id, holder, host, pid, proc_start, token, since, heartbeat, expires, epoch"


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


@contextmanager
def thread_lease(checkpointer: Any, thread_id: str, *, ttl: float = LEASE_TTL) -> Iterator[ThreadLease]:
    """Hold the lease of ``thread_id`` in ``checkpointer``'s database for the block.

    Raises:
        ThreadBusyError: another live process (or another block in this one) holds it.
        ConfigurationError: ``checkpointer`` is not a checkpointer, or ``ttl`` is not positive.
    """
    if not isinstance(checkpointer, BaseCheckpointSaver):
        raise ConfigurationError(f"thread_lease needs a checkpointer, got {type(checkpointer).__name__}")
    if not ttl > 0:
        raise ConfigurationError(f"the lease ttl must be positive, got {ttl}")
    store = _store_for(checkpointer)
    lease = store.acquire(str(thread_id), ttl)
    held = hold(lease)
    beat = threading.Thread(target=_heartbeat, args=(store, lease), name=f"planmode-lease-{thread_id}", daemon=True)
    beat.start()
    try:
        yield lease
    except Exception as exc:
        lost = refused_write(exc, lease.thread_id, lease)
        if lost is not None and lost is not exc:
            raise lost from exc
        raise
    finally:
        lease._stop.set()
        beat.join(timeout=ttl)
        store.release(lease)
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


def stream(graph: Any, input: Any, config: Any, **kwargs: Any) -> Iterator[Any]:
    """``graph.stream(input, config, **kwargs)`` while holding the thread's lease (as `run`)."""
    saver = getattr(graph, "checkpointer", None)
    if not isinstance(saver, BaseCheckpointSaver):
        yield from graph.stream(input, config, **kwargs)
        return
    with thread_lease(saver, _thread_of(config)):
        yield from graph.stream(input, config, **kwargs)


def _thread_of(config: Any) -> str:
    thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
    if thread_id in (None, ""):
        raise ConfigurationError("a run needs a thread id: config={'configurable': {'thread_id': ...}}")
    return str(thread_id)


# -- the fence: which lease this process holds on a thread ------------------------------------------------

_held_lock = threading.Lock()
_HELD: dict[str, list[ThreadLease]] = {}  # thread id -> the leases this process holds on it (newest last)
_CURRENT: ContextVar[tuple[ThreadLease, ...]] = ContextVar("planmode_thread_leases", default=())
#: The database each saver (or lease store) writes to, once known: how a write finds the lease of its database.
_DB_KEYS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
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


def _lease_of(config: Any) -> ThreadLease | None:
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
        db = _DB_KEYS.get(saver) if saver is not None else None
    except TypeError:  # not weakly referable
        db = None
    return held_lease(db, str(thread_id))


def assert_lease_held(config: Any = None) -> None:
    """Raise `LeaseLostError` when this process held the lease of the run's thread and lost it; execute_step
    calls it before a step starts. Cheap: a lease renewed within half its ttl is trusted; an older one (the
    process was stopped, or its heartbeat failing) is renewed in the database first. A run without a lease in
    this process passes. ``config``: the run's config (default: the current run's)."""
    lease = _lease_of(config)
    if lease is None or (not lease.lost and time.monotonic() - lease.renewed < lease.ttl / 2):
        return
    store = lease._store
    if not lease.lost and isinstance(store, _Store):
        if store.renew(lease):
            return
        lease.lost = True
    if lease.lost:
        raise LeaseLostError(lease.thread_id, lease.epoch)


def _heartbeat(store: _Store, lease: ThreadLease) -> None:
    interval = max(0.05, lease.ttl / 3)
    while not lease._stop.wait(interval):
        try:
            if not store.renew(lease):
                lease.lost = True
                log.warning("the lease of thread %r was taken over by another process", lease.thread_id)
                return
        except Exception as exc:  # a database hiccup: the next beat tries again (the ttl leaves room)
            log.warning("could not renew the lease of thread %r: %s", lease.thread_id, exc)


# -- who holds it ----------------------------------------------------------------------------------------
# _HOST, _proc_start and _dead (whether a holder on this host is certainly gone) live in planmode.persistence.rows,
# which ``planmode ls`` reads without LangGraph.


# -- where it is kept ------------------------------------------------------------------------------------
# The statements, shared with the async stores (planmode.persistence.alease); ``?`` placeholders (``%s`` for
# PostgreSQL).


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
    """Fence the writes made through a `SqliteSaver`'s connection (see the module docstring); idempotent."""
    with saver.lock:
        saver.setup()  # the tables the triggers watch
        conn = saver.conn
        conn.execute(create_sql(False))
        if "epoch" not in {r[0] for r in conn.execute(columns_sql(False)).fetchall()}:
            try:
                conn.execute(ADD_EPOCH_SQL)
            except sqlite3.OperationalError as exc:  # another process added it meanwhile
                if "duplicate column" not in str(exc):
                    raise
        db = sqlite_db_key(conn.execute(SQLITE_DB_SQL).fetchall(), conn)
        _DB_KEYS[saver] = db
        conn.create_function(FENCE_FUNCTION, 1, sqlite_fence_function(db))
        for table in FENCED_TABLES:
            conn.execute(sqlite_fence_sql(table))
        if conn.in_transaction:
            conn.commit()


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


class Rows(Protocol):
    """A cursor after one statement, of sqlite3 or psycopg (the lease stores' ``execute`` returns it)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class _Store:
    def acquire(self, thread_id: str, ttl: float) -> ThreadLease:
        raise NotImplementedError

    def renew(self, lease: ThreadLease) -> bool:
        raise NotImplementedError

    def release(self, lease: ThreadLease) -> None:
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
    """The lease table in a SQLite file or a PostgreSQL database (``?`` or ``%s`` placeholders)."""

    def __init__(self, saver: Any, postgres: bool) -> None:
        self.saver = saver
        self.postgres = postgres
        self.db = ""
        try:
            with self._transaction() as execute:
                self._prepare(execute)
        except Exception:
            # PostgreSQL's CREATE TABLE IF NOT EXISTS can fail when another process creates the same table at
            # that moment (a unique violation in its catalog): then the table exists, and once more is a no-op.
            with self._transaction() as execute:
                self._prepare(execute)
        if postgres:
            _DB_KEYS[saver] = self.db
        else:
            install_sqlite_fence(saver)
            self.db = _DB_KEYS[saver]

    def _prepare(self, execute: Any) -> None:
        """Create the table, or add the epoch to one made before it; learn which database this is."""
        execute(create_sql(self.postgres))
        if "epoch" not in {_plain(r)[0] for r in execute(columns_sql(self.postgres)).fetchall()}:
            execute(ADD_EPOCH_SQL)
        if self.postgres:
            self.db = pg_db_key(execute(PG_DB_SQL).fetchone())

    @contextmanager
    def _transaction(self) -> Iterator[Callable[..., Rows]]:
        """``execute(sql, params) -> cursor`` inside one write transaction."""
        if self.postgres:
            conn_cm = pg_connection(self.saver)
            with conn_cm as conn, conn.transaction(), conn.cursor() as pg_cur:
                rows: Rows = pg_cur

                def execute_pg(sql: str, params: tuple[Any, ...] = ()) -> Rows:
                    pg_cur.execute(sql.replace("?", "%s"), params)
                    return rows

                yield execute_pg
            return
        saver: SqliteSaver = self.saver
        with saver.lock:
            conn = saver.conn
            if conn.in_transaction:
                conn.commit()
            cur = conn.cursor()
            cur.execute("BEGIN IMMEDIATE")  # the write lock now: two processes decide one after the other
            try:

                def execute_sqlite(sql: str, params: tuple[Any, ...] = ()) -> Rows:
                    cur.execute(sql, params)
                    return cur

                yield execute_sqlite
            except BaseException:
                conn.rollback()
                raise
            else:
                conn.commit()
            finally:
                cur.close()

    def acquire(self, thread_id: str, ttl: float) -> ThreadLease:
        lease, values = _new_lease(thread_id, ttl)
        lease.db, lease._store = self.db, self
        with self._transaction() as execute:
            if execute(INSERT_SQL, values).rowcount == 1:
                lease.epoch = 1
                return lease
            row = execute(select_sql(self.postgres), (thread_id,)).fetchone()
            _decide(lease, _plain(row))
            execute(TAKEOVER_SQL, (*values[1:], lease.epoch, thread_id))
        if lease.taken_over is not None:
            log.info("took over the lease of thread %r from %s (gone)", thread_id, lease.taken_over)
        return lease

    def renew(self, lease: ThreadLease) -> bool:
        began = time.monotonic()
        now = time.time()
        with self._transaction() as execute:
            renewed = bool(execute(RENEW_SQL, (now, now + lease.ttl, lease.thread_id, lease.token)).rowcount == 1)
        if renewed:
            lease.renewed = began
        return renewed

    def release(self, lease: ThreadLease) -> None:
        try:
            with self._transaction() as execute:
                execute(RELEASE_SQL, (lease.thread_id, lease.token))
        except Exception as exc:  # the database is gone: the lease expires on its own
            log.warning("could not release the lease of thread %r: %s", lease.thread_id, exc)


def _plain(row: Any) -> tuple[Any, ...]:
    """A row as a tuple (PostgresSaver connections return dict rows)."""
    if isinstance(row, dict):
        return tuple(row.values())
    return tuple(row)


class _LocalStore(_Store):
    """Leases for a checkpointer that lives in this process only (one per saver object)."""

    _lock = threading.Lock()
    _held: ClassVar[dict[tuple[int, str], ThreadLease]] = {}  # shared by every instance, on purpose

    def __init__(self, saver: Any) -> None:
        self.key = id(saver)

    def acquire(self, thread_id: str, ttl: float) -> ThreadLease:
        lease, _ = _new_lease(thread_id, ttl)
        with self._lock:
            other = self._held.get((self.key, thread_id))
            if other is not None:
                raise ThreadBusyError(thread_id, other.holder, other.since)
            self._held[(self.key, thread_id)] = lease
        return lease

    def renew(self, lease: ThreadLease) -> bool:
        with self._lock:
            return self._held.get((self.key, lease.thread_id)) is lease

    def release(self, lease: ThreadLease) -> None:
        with self._lock:
            if self._held.get((self.key, lease.thread_id)) is lease:
                del self._held[(self.key, lease.thread_id)]


_stores: weakref.WeakKeyDictionary[Any, _SqlStore] = weakref.WeakKeyDictionary()
_stores_lock = threading.Lock()


def _store_for(saver: Any) -> _Store:
    if isinstance(saver, SqliteSaver) or is_postgres(saver):
        with _stores_lock:  # the table is created once per saver object
            store = _stores.get(saver)
            if store is None:
                store = _stores[saver] = _SqlStore(saver, postgres=not isinstance(saver, SqliteSaver))
            return store
    return _LocalStore(saver)
