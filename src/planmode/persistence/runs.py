"""Run queries: the planmode runs stored in a checkpointer, newest first.

    for run in list_runs(sqlite_checkpointer("runs.sqlite"), status="awaiting_approval", limit=20):
        print(run.thread_id, run.goal, run.status, run.plan_version, run.steps, run.updated_at)

A run is the latest checkpoint of one (thread, namespace) holding planmode's state, nested runs included.
How the SQLite and PostgreSQL paths avoid reading every checkpoint: docs/architecture.md, "Run queries".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, get_args

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from planmode.errors import ConfigurationError
from planmode.persistence import with_planmode_types
from planmode.persistence._savers import is_postgres, pg_connection
from planmode.persistence.rows import HEAD_SQL, heads_sql, parse_ts
from planmode.state.graph_state import RunStatus
from planmode.state.reducer import restore_plan

__all__ = ["RUN_STATUSES", "RunInfo", "list_runs"]

#: Every run status `list_runs` can filter by.
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)

_BATCH = 200


@dataclass(frozen=True)
class RunInfo:
    """One planmode run, as its latest checkpoint shows it."""

    thread_id: str
    """The thread the run belongs to."""
    checkpoint_ns: str
    """``""`` for a top-level run; the parent task's namespace for planmode nested in a parent agent."""
    checkpoint_id: str
    """The id of the run's latest checkpoint."""
    goal: str
    """The task of the run."""
    status: str
    """planning, awaiting_approval, running, completed, failed, answered or cancelled."""
    plan_version: int | None
    """The plan's version (None when there is no plan: a direct answer, or planning not done yet)."""
    steps: dict[str, int] = field(default_factory=dict)
    """How many steps have each status (every step status present; empty without a plan)."""
    updated_at: datetime | None = None
    """When the latest checkpoint was written (UTC)."""
    title: str = ""
    """The plan's title."""
    error: str | None = None
    """Why the run failed, when it did."""

    @property
    def total_steps(self) -> int:
        """The number of steps in the plan."""
        return sum(self.steps.values())

    @property
    def config(self) -> RunnableConfig:
        """The config that reads this run's state (``graph.get_state(run.config)`` for a top-level run)."""
        return {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": self.checkpoint_ns}}


def list_runs(
    source: Any,
    *,
    status: str | Iterable[str] | None = None,
    limit: int | None = 50,
    nested: bool = True,
) -> list[RunInfo]:
    """The planmode runs stored in a checkpointer, newest first.

    Args:
        source: a checkpointer (``SqliteSaver`` — fast path —, ``PostgresSaver`` or any `BaseCheckpointSaver`),
            or a compiled graph that has one.
        status: keep only runs with this status (or one of these statuses), e.g. ``"awaiting_approval"``;
            spaces and dashes are read as underscores ("awaiting approval").
        limit: at most this many runs (``None``: all).
        nested: also list planmode runs nested in a parent agent's thread (see the module docstring).

    Raises:
        ValueError: an unknown status, or a negative limit.
        ConfigurationError: ``source`` is a graph without a checkpointer, or not a checkpointer at all.
    """
    saver = _saver_of(source)
    wanted = _statuses(status)
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")
    if limit == 0:
        return []
    if isinstance(saver, SqliteSaver):
        heads = _sqlite_heads(saver, nested, wanted)
    elif is_postgres(saver):
        heads = _postgres_heads(saver, nested, wanted)
    else:
        heads = _generic_heads(saver, nested)
    out: list[RunInfo] = []
    for thread_id, ns, checkpoint_id, checkpoint in heads:
        run = _run_info(thread_id, ns, checkpoint_id, checkpoint)
        if run is None or (wanted is not None and run.status not in wanted):
            continue
        out.append(run)
        if limit is not None and len(out) >= limit:
            break
    return out


def _saver_of(source: Any) -> BaseCheckpointSaver[Any]:
    if isinstance(source, BaseCheckpointSaver):
        saver: Any = source
    elif hasattr(source, "checkpointer"):
        saver = source.checkpointer
        if not isinstance(saver, BaseCheckpointSaver):
            raise ConfigurationError(
                "this graph has no checkpointer of its own: pass the checkpointer that keeps its runs, e.g. "
                "list_runs(planmode.persistence.sqlite_checkpointer('runs.sqlite'))"
            )
    else:
        raise ConfigurationError(f"list_runs needs a checkpointer or a compiled graph, got {type(source).__name__}")
    return with_planmode_types(saver)  # the same saver type, serializer allowlisted


def _statuses(status: str | Iterable[str] | None) -> frozenset[str] | None:
    if status is None:
        return None
    given = [status] if isinstance(status, str) else list(status)
    names = frozenset(s.strip().lower().replace(" ", "_").replace("-", "_") for s in given)
    unknown = sorted(names - set(RUN_STATUSES))
    if unknown:
        raise ValueError(f"unknown run status {', '.join(map(repr, unknown))}; use one of {', '.join(RUN_STATUSES)}")
    return names


Head = tuple[str, str, str, dict[str, Any]]


def _sqlite_heads(saver: SqliteSaver, nested: bool, wanted: frozenset[str] | None) -> Iterator[Head]:
    """Each (thread, namespace)'s latest checkpoint, newest first, deserialised batch by batch (lazily).

    With a status filter, a plain msgpack blob (type ``"msgpack"``: not encrypted, not compressed) that does
    not contain any of the wanted status strings is skipped without deserialising it: msgpack stores a string
    as its UTF-8 bytes, so the ``status`` value of a matching run is always in its blob. (A blob that does
    contain the bytes may still be another status — it is deserialised and checked.)
    """
    needles = tuple(w.encode() for w in wanted) if wanted is not None else None
    with saver.cursor(transaction=False) as cur:
        cur.execute(heads_sql(nested))
        keys: list[tuple[str, str, str]] = cur.fetchall()
    for start in range(0, len(keys), _BATCH):
        batch = keys[start : start + _BATCH]
        rows: list[tuple[str, str, str, str | None, bytes | None]] = []
        with saver.cursor(transaction=False) as cur:  # the saver's lock is held per batch, not for the whole list
            for key in batch:
                cur.execute(HEAD_SQL, key)
                row = cur.fetchone()
                if row is not None:  # gone since step 1 (a deleted thread)
                    rows.append((*key, row[0], row[1]))
        for thread_id, ns, checkpoint_id, type_, blob in rows:
            if type_ is None or blob is None:
                continue
            if needles is not None and type_ == "msgpack" and not any(n in blob for n in needles):
                continue
            yield thread_id, ns, checkpoint_id, saver.serde.loads_typed((type_, blob))


@contextmanager
def _pg_cursor(saver: Any) -> Iterator[Any]:
    """A plain (tuple-row) cursor on the saver's pool or connection."""
    from psycopg.rows import tuple_row

    with pg_connection(saver) as conn, conn.cursor(row_factory=tuple_row) as cur:
        yield cur


def _postgres_heads(saver: Any, nested: bool, wanted: frozenset[str] | None) -> Iterator[Head]:
    """Each (thread, namespace)'s latest checkpoint, newest first, each loaded with the saver's ``get_tuple``.

    ``PostgresSaver`` keeps plain strings inline in the checkpoint's JSON, so a run's status can be read in
    SQL without loading its blobs; with a status filter, heads whose inline status is another one are skipped
    there. A head without an inline status (another storage format) is loaded and judged like every other.
    """
    where = "" if nested else "WHERE checkpoint_ns = ''"
    heads = (
        f"SELECT thread_id, checkpoint_ns, max(checkpoint_id) AS head FROM checkpoints {where} "
        "GROUP BY thread_id, checkpoint_ns"
    )
    order = 'ORDER BY h.head DESC, h.thread_id COLLATE "C", h.checkpoint_ns COLLATE "C"'
    with _pg_cursor(saver) as cur:
        if wanted is None:  # no filter: the status is not needed, and reading it costs a join
            cur.execute(f"SELECT h.thread_id, h.checkpoint_ns, h.head, NULL FROM ({heads}) h {order}")
        else:
            cur.execute(
                "SELECT h.thread_id, h.checkpoint_ns, h.head, c.checkpoint -> 'channel_values' ->> 'status' "
                f"FROM ({heads}) h JOIN checkpoints c ON c.thread_id = h.thread_id "
                f"AND c.checkpoint_ns = h.checkpoint_ns AND c.checkpoint_id = h.head {order}"
            )
        keys: list[tuple[str, str, str, str | None]] = cur.fetchall()
    for thread_id, ns, checkpoint_id, inline_status in keys:
        if wanted is not None and inline_status is not None and inline_status not in wanted:
            continue
        config: RunnableConfig = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}
        }
        tup = saver.get_tuple(config)
        if tup is not None:
            yield thread_id, ns, checkpoint_id, dict(tup.checkpoint)


def _generic_heads(saver: BaseCheckpointSaver[Any], nested: bool) -> Iterator[Head]:
    """The same through the `BaseCheckpointSaver` API: every checkpoint is read, the newest per key kept."""
    latest: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for tup in saver.list(None):
        conf = tup.config["configurable"]
        key = (str(conf["thread_id"]), str(conf.get("checkpoint_ns") or ""))
        if not nested and key[1]:
            continue
        checkpoint_id = str(conf.get("checkpoint_id") or tup.checkpoint["id"])
        if key not in latest or checkpoint_id > latest[key][0]:
            latest[key] = (checkpoint_id, dict(tup.checkpoint))
    ordered = sorted(latest.items())  # ties (equal checkpoint ids) by thread and namespace, as in the SQL paths
    ordered.sort(key=lambda item: item[1][0], reverse=True)
    for (thread_id, ns), (checkpoint_id, checkpoint) in ordered:
        yield thread_id, ns, checkpoint_id, checkpoint


def _run_info(thread_id: str, ns: str, checkpoint_id: str, checkpoint: dict[str, Any]) -> RunInfo | None:
    """The run in a checkpoint, or None when its state is not planmode's."""
    values = checkpoint.get("channel_values") or {}
    if "settings" not in values or "status" not in values:
        return None
    plan = restore_plan(values.get("plan"))  # a Plan, or its JSON dict as another serializer restores it
    plan = plan if plan is not None and plan.version > 0 else None
    goal = values.get("goal") or (plan.goal if plan is not None else "")
    return RunInfo(
        thread_id=thread_id,
        checkpoint_ns=ns,
        checkpoint_id=checkpoint_id,
        goal=str(goal),
        status=str(values.get("status")),
        plan_version=plan.version if plan is not None else None,
        steps=plan.counts() if plan is not None else {},
        updated_at=parse_ts(checkpoint.get("ts")),
        title=plan.title if plan is not None else "",
        error=values.get("error"),
    )
