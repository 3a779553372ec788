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

Supported checkpointers: ``SqliteSaver`` and ``PostgresSaver`` (the lease is shared by every process using the
database), and any other saver (``InMemorySaver``...) with a lease local to this process, which is all such a
saver can share. A LangGraph server (``langgraph dev``, LangGraph Platform) already runs one run per thread at
a time and needs none of this.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from planmode._savers import is_postgres, pg_connection
from planmode.errors import ConfigurationError, ThreadBusyError

__all__ = ["LEASE_TABLE", "LEASE_TTL", "ThreadLease", "run", "stream", "thread_lease"]

log = logging.getLogger(__name__)

#: The table that holds the leases, in the checkpoint database.
LEASE_TABLE = "planmode_leases"
#: Seconds after the last heartbeat at which another process may take a lease over.
LEASE_TTL = 30.0

_COLUMNS = "thread_id, holder, host, pid, proc_start, token, since, heartbeat, expires"


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
    """True when a heartbeat found the lease gone (taken over after it expired): the run is no longer alone."""
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)


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
    beat = threading.Thread(target=_heartbeat, args=(store, lease), name=f"planmode-lease-{thread_id}", daemon=True)
    beat.start()
    try:
        yield lease
    finally:
        lease._stop.set()
        beat.join(timeout=ttl)
        store.release(lease)


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

_HOST = socket.gethostname()


def _proc_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, from /proc), to tell a reused pid."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return fields[19] if len(fields) > 19 else None


def _dead(host: str, pid: int, proc_start: str | None) -> bool:
    """Whether a holder on this host is certainly gone: no such process, a zombie, or a reused pid."""
    if host != _HOST:
        return False  # another machine: only its heartbeat can tell
    if pid == os.getpid():
        return False  # another lease of this very process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by another user
        pass
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rpartition(")")[2].split()[:1]
    except OSError:
        return False
    if state == ["Z"]:  # killed, not reaped yet
        return True
    now = _proc_start(pid)
    return bool(proc_start and now and now != proc_start)


# -- where it is kept ------------------------------------------------------------------------------------
# The statements, shared with the async stores (planmode.alease); ``?`` placeholders (``%s`` for PostgreSQL).


def create_sql(postgres: bool) -> str:
    """The lease table, created idempotently."""
    real = "DOUBLE PRECISION" if postgres else "REAL"
    return (
        f"CREATE TABLE IF NOT EXISTS {LEASE_TABLE} (thread_id TEXT PRIMARY KEY, holder TEXT NOT NULL, "
        f"host TEXT NOT NULL, pid INTEGER NOT NULL, proc_start TEXT, token TEXT NOT NULL, "
        f"since {real} NOT NULL, heartbeat {real} NOT NULL, expires {real} NOT NULL)"
    )


def select_sql(postgres: bool) -> str:
    """The current holder of a thread's lease (locked for the transaction on PostgreSQL)."""
    lock = " FOR UPDATE" if postgres else ""
    return f"SELECT holder, host, pid, proc_start, since, expires FROM {LEASE_TABLE} WHERE thread_id = ?{lock}"


INSERT_SQL = (
    f"INSERT INTO {LEASE_TABLE} ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id) DO NOTHING"
)
TAKEOVER_SQL = (
    f"UPDATE {LEASE_TABLE} SET holder = ?, host = ?, pid = ?, proc_start = ?, token = ?, since = ?, "
    "heartbeat = ?, expires = ? WHERE thread_id = ?"
)
RENEW_SQL = f"UPDATE {LEASE_TABLE} SET heartbeat = ?, expires = ? WHERE thread_id = ? AND token = ?"
RELEASE_SQL = f"DELETE FROM {LEASE_TABLE} WHERE thread_id = ? AND token = ?"


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
    )
    return lease, (thread_id, lease.holder, _HOST, pid, _proc_start(pid), lease.token, now, now, now + ttl)


def _decide(lease: ThreadLease, row: Any) -> None:
    """Take ``row``'s lease over when its holder is gone, else raise `ThreadBusyError`."""
    holder, host, pid, proc_start, since, expires = row
    if float(expires) < time.time() or _dead(str(host), int(pid), proc_start):
        lease.taken_over = str(holder)
        return
    raise ThreadBusyError(lease.thread_id, str(holder), datetime.fromtimestamp(float(since), UTC))


class _SqlStore(_Store):
    """The lease table in a SQLite file or a PostgreSQL database (``?`` or ``%s`` placeholders)."""

    def __init__(self, saver: Any, postgres: bool) -> None:
        self.saver = saver
        self.postgres = postgres
        try:
            with self._transaction() as execute:
                execute(create_sql(postgres))
        except Exception:
            # PostgreSQL's CREATE TABLE IF NOT EXISTS can fail when another process creates the same table at
            # that moment (a unique violation in its catalog): then the table exists, and once more is a no-op.
            with self._transaction() as execute:
                execute(create_sql(postgres))

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """``execute(sql, params) -> cursor`` inside one write transaction."""
        if self.postgres:
            conn_cm = pg_connection(self.saver)
            with conn_cm as conn, conn.transaction(), conn.cursor() as cur:

                def execute_pg(sql: str, params: tuple[Any, ...] = ()) -> Any:
                    cur.execute(sql.replace("?", "%s"), params)
                    return cur

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

                def execute_sqlite(sql: str, params: tuple[Any, ...] = ()) -> Any:
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
        with self._transaction() as execute:
            if execute(INSERT_SQL, values).rowcount == 1:
                return lease
            row = execute(select_sql(self.postgres), (thread_id,)).fetchone()
            _decide(lease, _plain(row))
            execute(TAKEOVER_SQL, (*values[1:], thread_id))
        log.info("took over the lease of thread %r from %s (gone)", thread_id, lease.taken_over)
        return lease

    def renew(self, lease: ThreadLease) -> bool:
        now = time.time()
        with self._transaction() as execute:
            return bool(execute(RENEW_SQL, (now, now + lease.ttl, lease.thread_id, lease.token)).rowcount == 1)

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
