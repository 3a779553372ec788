"""What the checkpoint database holds, read with plain SQL and without LangGraph: the head checkpoint of each run,
who holds each thread's lease, and a checkpoint's time.

`planmode.persistence.runs` (through LangGraph's savers) and ``planmode ls`` (`planmode.cli.runlist`, reading a
SQLite file without the LangGraph stack: tests/cli/test_cli_startup.py) share these; `planmode.persistence.lease`
keeps its table here and decides with `holder_dead` when a holder is gone.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

__all__ = [
    "HEAD_SQL",
    "HELD_LEASES_SQL",
    "HOST",
    "LEASE_TABLE",
    "heads_sql",
    "holder_dead",
    "lease_holders",
    "parse_ts",
    "proc_start",
    "sqlite_lease_holders",
]

#: The table that holds the leases, in the checkpoint database.
LEASE_TABLE = "planmode_leases"
#: This host's name, as a lease records its holder's.
HOST = socket.gethostname()
#: The leases taken and not released, as rows of (thread_id, holder, host, pid, proc_start, expires).
HELD_LEASES_SQL = f"SELECT thread_id, holder, host, pid, proc_start, expires FROM {LEASE_TABLE} WHERE token <> ''"
#: The type and blob of one checkpoint (thread, namespace, id), ``?`` placeholders.
HEAD_SQL = "SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"


def heads_sql(nested: bool) -> str:
    """The (thread, namespace, id) of each run's latest checkpoint, newest first (ties by thread and namespace);
    only the top-level runs (namespace ``""``) unless ``nested``. SQLite's dialect."""
    where = "" if nested else "WHERE checkpoint_ns = ''"
    return (
        f"SELECT thread_id, checkpoint_ns, MAX(checkpoint_id) AS head FROM checkpoints {where} "
        "GROUP BY thread_id, checkpoint_ns ORDER BY head DESC, thread_id, checkpoint_ns"
    )


def parse_ts(ts: Any) -> datetime | None:
    """A checkpoint's ``ts`` (an ISO 8601 string, or a datetime already) as a datetime; None when it is neither."""
    if isinstance(ts, datetime):
        return ts
    if not isinstance(ts, str) or not ts:
        return None
    try:
        return datetime.fromisoformat(ts)
    except ValueError:
        return None


def proc_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, from /proc), to tell a reused pid."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return fields[19] if len(fields) > 19 else None


def holder_dead(host: str, pid: int, started: str | None) -> bool:
    """Whether a lease holder on this host is certainly gone: no such process, a zombie, or a reused pid (its start
    time is not ``started``). A holder on another host cannot be checked: only its heartbeat can tell."""
    if host != HOST:
        return False
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
    now = proc_start(pid)
    return bool(started and now and now != started)


def lease_holders(rows: Iterable[Any]) -> dict[str, str]:
    """The threads whose lease is held now, with the holder (``host:pid``), among `HELD_LEASES_SQL`'s rows: the
    unexpired ones whose holder is not certainly gone."""
    now = time.time()
    return {
        str(thread): str(holder)
        for thread, holder, host, pid, started, expires in rows
        if float(expires) >= now and not holder_dead(str(host), int(pid), None if started is None else str(started))
    }


def sqlite_lease_holders(conn: sqlite3.Connection) -> dict[str, str]:
    """`lease_holders` of a SQLite database; empty when no lease was ever taken in it."""
    with contextlib.suppress(sqlite3.OperationalError):
        return lease_holders(conn.execute(HELD_LEASES_SQL).fetchall())
    return {}
