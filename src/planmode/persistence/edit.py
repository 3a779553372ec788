"""Editing a thread's plan from outside a run, without losing an edit to a concurrent one.

    result = planmode.edit_plan(graph, config, {"add_steps": [...]}, expected_revision=payload["revision"])
    if not result.applied:
        print(result.reasons)            # e.g. the plan changed since you read it: read it again

``graph.update_state`` alone is last-writer-wins: two edits that start from the same checkpoint each write a
child of it, and the thread's head is whichever was written last, so the other edit is silently lost (it
sits in a branch nobody reads). `edit_plan` closes that gap in two ways:

- **Edits of one thread are serialized.** It holds a per-thread edit lock while it reads the plan and writes
  the edit: an in-process lock, plus, on a SQLite file, an exclusive ``flock`` on a small lock file beside
  the database (``<db>.edit-lock``; released by the OS if the holder dies), or, on PostgreSQL, a session
  advisory lock. So the second of two concurrent edits reads the plan the first one wrote.
- **An edit names the revision it was made against** (``expected_revision``: the ``revision`` of the
  approval payload, or ``Plan.revision``). It travels in the `PlanUpdate`, so the plan reducer refuses it
  when the plan is at another revision and records the refusal in ``plan.rejections`` (the reducer never
  raises). A stale edit is refused and recorded, never dropped.

The update goes through ``update_state`` like any edit (Studio's included), so while the run waits for
approval the approval is asked again with the edited plan (and its ``changes``). Runs do not take this lock:
an edit made while a run is executing can still race with the run's own checkpoints (a run lease is the
remedy for that); edit at the approval, or when the run is stopped.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel

from planmode.errors import ConfigurationError, PlanParseError, ThreadNotFoundError
from planmode.persistence._savers import is_postgres
from planmode.state.models import Plan, PlanPatch, PlanSource
from planmode.state.parse import coerce_plan_or_patch
from planmode.state.reducer import PlanUpdate

__all__ = ["EditResult", "edit_lock", "edit_plan"]

_LOCKS_GUARD = threading.Lock()
_LOCKS: dict[tuple[str, str], threading.Lock] = {}


@dataclass(frozen=True)
class EditResult:
    """What became of an edit."""

    applied: bool
    """True when the edit is in the thread's plan now."""
    plan: Plan | None
    """The thread's plan after the edit (unchanged but for the recorded rejection when refused)."""
    reasons: list[str] = field(default_factory=list)
    """Why it was refused (empty when applied)."""


def edit_plan(
    graph: Pregel[Any, Any, Any, Any],
    config: RunnableConfig,
    edit: PlanPatch | Plan | Mapping[str, Any],
    *,
    expected_revision: str,
    source: str = PlanSource.HUMAN_EDIT,
    timeout: float = 30.0,
) -> EditResult:
    """Apply ``edit`` (a patch, or a whole plan converted into a patch by diff) to the plan of the thread in
    ``config``, if that plan is still at ``expected_revision``; otherwise refuse it and record the refusal.

    Raises `ThreadNotFoundError` when the thread has no checkpoint, `ConfigurationError` without a
    checkpointer, `PlanParseError` when ``edit`` is neither a plan nor a patch, ``ValueError`` without an
    ``expected_revision``, and ``TimeoutError`` when another edit holds the thread's lock for ``timeout``
    seconds.
    """
    if not isinstance(expected_revision, str) or not expected_revision:
        raise ValueError("edit_plan needs the expected_revision the edit was made against (Plan.revision)")
    thread_id = str((config.get("configurable") or {}).get("thread_id") or "")
    if not thread_id:
        raise ValueError("config has no thread_id: pass {'configurable': {'thread_id': ...}}")
    if isinstance(edit, Mapping) and not isinstance(edit, PlanPatch | Plan):
        parsed = coerce_plan_or_patch(dict(edit))
    elif isinstance(edit, PlanPatch | Plan):
        parsed = edit
    else:
        raise PlanParseError(f"an edit is a PlanPatch, a Plan or its JSON object, not {type(edit).__name__}")
    head: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    saver = graph.checkpointer
    if not isinstance(saver, BaseCheckpointSaver):
        raise ConfigurationError("edit_plan needs a graph compiled with a checkpointer (e.g. sqlite_checkpointer)")
    with edit_lock(saver, thread_id, timeout=timeout):
        before = graph.get_state(head)
        if not before.created_at:
            raise ThreadNotFoundError(f"no thread {thread_id!r} in this database")
        old = before.values.get("plan")
        update = PlanUpdate(
            plan=parsed if isinstance(parsed, Plan) else None,
            patch=parsed if isinstance(parsed, PlanPatch) else None,
            source=source,
            expected_revision=expected_revision,
        )
        graph.update_state(head, {"plan": update})
        plan = graph.get_state(head).values.get("plan")
    if not isinstance(plan, Plan):
        return EditResult(applied=False, plan=None, reasons=["there is no plan to edit"])
    old_version = old.version if isinstance(old, Plan) else 0
    if plan.version != old_version:
        return EditResult(applied=True, plan=plan)
    known = old.rejections if isinstance(old, Plan) else []
    if plan.rejections and plan.rejections != known:
        return EditResult(applied=False, plan=plan, reasons=list(plan.rejections[-1].reasons))
    return EditResult(applied=False, plan=plan, reasons=["the edit changes nothing"])


@contextlib.contextmanager
def edit_lock(saver: BaseCheckpointSaver[Any], thread_id: str, *, timeout: float = 30.0) -> Iterator[None]:
    """Hold the edit lock of ``thread_id`` in ``saver``'s database (see the module docstring)."""
    where = _database_of(saver)
    local = _local_lock(where, thread_id)
    if not local.acquire(timeout=timeout):
        raise TimeoutError(f"another edit of thread {thread_id!r} holds its lock")
    try:
        if where.startswith("file:"):
            with _file_lock(Path(where.removeprefix("file:")), timeout):
                yield
        elif where.startswith("postgres:"):
            with _postgres_lock(saver, thread_id, timeout):
                yield
        else:
            yield
    finally:
        local.release()


def _local_lock(where: str, thread_id: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault((where, thread_id), threading.Lock())


def _database_of(saver: BaseCheckpointSaver[Any]) -> str:
    """A key naming the database behind ``saver``: ``file:<path>``, ``postgres:<id>`` or ``memory:<id>``."""
    conn = getattr(saver, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        try:
            rows = conn.execute("PRAGMA database_list").fetchall()
        except sqlite3.Error:
            rows = []
        path = next((r[2] for r in rows if r[1] == "main"), "")
        if path:
            return "file:" + str(Path(path).resolve())
    elif is_postgres(saver):  # a PostgresSaver, planmode's fenced one included
        return f"postgres:{id(saver)}"
    return f"memory:{id(saver)}"


@contextlib.contextmanager
def _file_lock(db: Path, timeout: float) -> Iterator[None]:
    """An exclusive ``flock`` on ``<db>.edit-lock`` (a separate file: closing any descriptor of the database
    file itself would drop SQLite's own locks in this process)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: the in-process lock is all there is
        yield
        return
    path = db.with_name(db.name + ".edit-lock")
    with open(path, "a+b") as fh:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"another process holds the edit lock {path}") from None
                time.sleep(0.005)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def _postgres_lock(saver: BaseCheckpointSaver[Any], thread_id: str, timeout: float) -> Iterator[None]:
    """A session advisory lock keyed by the thread id, on a connection of its own."""
    conn: Any = getattr(saver, "conn", None)
    key = int.from_bytes(hashlib.sha256(f"planmode-edit:{thread_id}".encode()).digest()[:8], "big", signed=True)
    pool_connection = getattr(conn, "connection", None)
    ctx = pool_connection(timeout=timeout) if callable(pool_connection) else contextlib.nullcontext(conn)
    with ctx as c:
        deadline = time.monotonic() + timeout
        while not _first(c.execute("SELECT pg_try_advisory_lock(%s) AS locked", (key,)).fetchone()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"another edit of thread {thread_id!r} holds its lock")
            time.sleep(0.01)
        try:
            yield
        finally:
            c.execute("SELECT pg_advisory_unlock(%s)", (key,))


def _first(row: Any) -> object:
    """The first column of a row, whatever the connection's row factory (tuples or dicts)."""
    if isinstance(row, Mapping):
        return next(iter(row.values()), None)
    return row[0] if row else None
