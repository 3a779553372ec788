"""What a run is, as `planmode ls` and `planmode show` say it, and the runs of a SQLite database read without
LangGraph (`planmode ls` starts in the time of click + rich: tests/cli/test_cli_startup.py).

A run's stored ``status`` says what the graph last wrote; it reads ``running`` after a Ctrl-C, a crash or a
rollback to the middle of a run. `run_state` tells those apart with two more facts: the interrupt pending at the
run's head checkpoint (an approval, a budget pause, the model lost) and whether a process holds the thread's lease
now (`planmode.persistence.rows`). Its answer is one of `RUN_STATES`:

==================  ====================================================================================
running             a process is running it now
interrupted         stopped before it finished (Ctrl-C, a crash, a rollback): ``planmode resume`` continues
awaiting_approval   a plan, a step or a changed workspace waits for a human: ``planmode resume``
over_budget         paused at its budget: ``planmode resume --max-tokens N`` (or ``--max-cost X``, ``--stop``)
model_unavailable   paused, the model could not be reached: ``planmode resume`` (optionally ``--base-url``)
completed           finished: every step done
answered            finished: answered directly, without a plan
failed              finished: failed (``planmode show`` says why)
cancelled           finished: cancelled at the approval
==================  ====================================================================================

Times are UTC, written with their zone (`when`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from planmode._packed import is_packed, unpack_plan
from planmode.persistence.rows import HEAD_SQL, heads_sql, parse_ts, sqlite_lease_holders

__all__ = [
    "FINISHED",
    "RUN_STATES",
    "RUN_STATUSES",
    "STATE_LABELS",
    "STEP_STATUSES",
    "RunRow",
    "connect_read_only",
    "interrupt_type",
    "iso",
    "matches",
    "run_state",
    "sqlite_runs",
    "wanted_states",
    "when",
]

#: The statuses a run's state can hold (`planmode.state.graph_state.RunStatus`; a test pins them equal).
RUN_STATUSES: tuple[str, ...] = (
    "new",
    "planning",
    "awaiting_approval",
    "running",
    "completed",
    "failed",
    "answered",
    "cancelled",
    "model_unavailable",
)
#: The statuses of a step (`planmode.state.models.StepStatus`; a test pins them equal).
STEP_STATUSES: tuple[str, ...] = ("pending", "running", "done", "failed", "blocked", "skipped")
#: The statuses of a finished run.
FINISHED: tuple[str, ...] = ("completed", "failed", "answered", "cancelled")
#: What a run is (see the module docstring), and how a person reads it.
STATE_LABELS: dict[str, str] = {
    "running": "running",
    "interrupted": "interrupted",
    "awaiting_approval": "awaiting approval",
    "over_budget": "paused: over budget",
    "model_unavailable": "paused: model unavailable",
    "completed": "completed",
    "answered": "answered",
    "failed": "failed",
    "cancelled": "cancelled",
}
RUN_STATES: tuple[str, ...] = tuple(STATE_LABELS)

#: The ``type`` of each interrupt payload planmode asks with, and the state a run waiting on it is in.
_INTERRUPT_STATES = {
    "planmode.budget": "over_budget",
    "planmode.model_unavailable": "model_unavailable",
}


def run_state(status: str, interrupt: str | None, running: bool) -> str:
    """What a run is (one of `RUN_STATES`), from its stored ``status``, the ``type`` of the interrupt pending at its
    head (``""`` for an interrupt of another shape, None when none is) and whether a process holds its lease."""
    if status in FINISHED:
        return status
    if interrupt is not None:  # a question waits (the lease is held while a terminal asks it)
        return _INTERRUPT_STATES.get(interrupt, "awaiting_approval")
    if status == "model_unavailable":
        return "model_unavailable"
    if running:
        return "running"
    if status == "awaiting_approval":  # rolled back to the approval: it asks again when resumed
        return "awaiting_approval"
    return "interrupted"


def when(moment: datetime | None) -> str:
    """A moment as every command prints it: UTC, labelled (``2026-11-26 11:57:17 UTC``); empty when unknown."""
    if moment is None:
        return ""
    if moment.tzinfo is None:  # LangGraph writes aware UTC times; a naive one is taken as UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(moment: datetime | None) -> str | None:
    """A moment for ``--json``: ISO 8601 in UTC with its offset (``2026-11-26T11:57:17.049397+00:00``)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


@dataclass(frozen=True)
class RunRow:
    """One run as `planmode ls` lists it (the fields of `planmode.persistence.runs.RunInfo`, plus its state)."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    goal: str
    status: str
    state: str
    plan_version: int | None = None
    steps: dict[str, int] = field(default_factory=dict)
    updated_at: datetime | None = None
    title: str = ""
    error: str | None = None

    @property
    def total_steps(self) -> int:
        return sum(self.steps.values())


class _Unreadable(Exception):
    """A checkpoint this module cannot read without LangGraph's serializer (another format, an old one)."""


class _Ext:
    """A msgpack extension value (a LangChain message, an `Interrupt`...): its decoded payload, kept opaque."""

    __slots__ = ("payload",)

    def __init__(self, payload: Any) -> None:
        self.payload = payload


def _loads(blob: bytes) -> object:
    import ormsgpack

    def hook(code: int, data: bytes) -> _Ext:
        try:
            return _Ext(ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS))
        except (ormsgpack.MsgpackDecodeError, ValueError, TypeError):
            return _Ext(None)

    try:
        return ormsgpack.unpackb(blob, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
    except (ormsgpack.MsgpackDecodeError, ValueError, TypeError) as exc:
        raise _Unreadable(str(exc)) from None


def interrupt_type(values: Iterable[Any]) -> str | None:
    """The ``type`` of the first interrupt payload among ``values`` (payloads, or LangGraph ``Interrupt``s as
    objects or as decoded extension values); ``""`` for an interrupt without one; None when there is none."""
    found: str | None = None
    for item in values:
        value = getattr(item, "value", item)
        if isinstance(value, _Ext):  # ["langgraph.types", "Interrupt", {"value": ..., "id": ...}]
            payload = value.payload
            kwargs = payload[2] if isinstance(payload, list | tuple) and len(payload) > 2 else None
            value = kwargs.get("value") if isinstance(kwargs, Mapping) else None
        kind = value.get("type") if isinstance(value, Mapping) else None
        if isinstance(kind, str) and kind:
            return kind
        found = ""
    return found


def _plan_facts(plan: Any) -> tuple[int | None, dict[str, int], str, str]:
    """(version, step counts, title, goal) of a plan stored as JSON data, packed or not (`planmode._packed`);
    `_Unreadable` for anything else."""
    if is_packed(plan):
        plan = unpack_plan(plan)
        if plan is None:
            raise _Unreadable("a packed plan that cannot be read")
    if plan is None:
        return None, {}, "", ""
    if not isinstance(plan, Mapping) or not isinstance(plan.get("steps", []), list):
        raise _Unreadable("a plan stored as an object")
    version = plan.get("version")
    if not isinstance(version, int) or version <= 0:
        return None, {}, "", ""
    counts = dict.fromkeys(STEP_STATUSES, 0)
    for step in plan.get("steps") or []:
        status = step.get("status") if isinstance(step, Mapping) else None
        if status not in counts:
            raise _Unreadable(f"a step status {status!r}")
        counts[str(status)] += 1
    return version, counts, str(plan.get("title") or ""), str(plan.get("goal") or "")


def connect_read_only(path: str) -> sqlite3.Connection:
    """A read-only connection to the SQLite file at ``path`` (it changes no file)."""
    return sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True, timeout=30)


def _heads(conn: sqlite3.Connection, nested: bool) -> Iterator[tuple[str, str, str, str | None, bytes | None]]:
    for key in conn.execute(heads_sql(nested)).fetchall():
        row = conn.execute(HEAD_SQL, key).fetchone()
        if row is not None:
            yield str(key[0]), str(key[1]), str(key[2]), row[0], row[1]


def _pending_interrupt(conn: sqlite3.Connection, thread: str, ns: str, checkpoint_id: str) -> str | None:
    rows = conn.execute(
        "SELECT channel, type, value FROM writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? "
        "AND channel IN ('__interrupt__', '__resume__')",
        (thread, ns, checkpoint_id),
    ).fetchall()
    if any(channel == "__resume__" for channel, _, _ in rows):  # answered: the run goes on
        return None
    values: list[Any] = []
    for _, type_, blob in rows:
        if type_ != "msgpack" or blob is None:
            raise _Unreadable(f"a pending write of type {type_!r}")
        value = _loads(blob)
        values.extend(value if isinstance(value, list | tuple) else [value])
    return interrupt_type(values) if rows else None


def sqlite_runs(path: str, *, wanted: frozenset[str] | None, limit: int | None, nested: bool = True) -> list[RunRow]:
    """The runs of the SQLite database at ``path``, newest first, read-only and without LangGraph: those whose
    status or state is in ``wanted`` (all when None), at most ``limit`` (all when None).

    Raises `LookupError` when a checkpoint is in a format only LangGraph's serializer reads (encrypted, another
    serializer, planmode objects of an older version): the caller lists the runs with
    `planmode.persistence.runs.list_runs` then.
    """
    conn = connect_read_only(path)
    try:
        holders = sqlite_lease_holders(conn)
        out: list[RunRow] = []
        for thread, ns, checkpoint_id, type_, blob in _heads(conn, nested):
            if limit is not None and len(out) >= limit:
                break
            if type_ is None or blob is None:
                continue
            try:
                if type_ != "msgpack":
                    raise _Unreadable(f"a checkpoint of type {type_!r}")
                checkpoint = _loads(blob)
                if not isinstance(checkpoint, Mapping):
                    continue  # not a planmode run
                values = checkpoint.get("channel_values")
                if not isinstance(values, Mapping) or "settings" not in values or "status" not in values:
                    continue  # not a planmode run
                version, counts, title, plan_goal = _plan_facts(values.get("plan"))
                interrupt = _pending_interrupt(conn, thread, ns, checkpoint_id)
            except _Unreadable as exc:
                raise LookupError(str(exc)) from None
            status = str(values.get("status"))
            row = RunRow(
                thread_id=thread,
                checkpoint_ns=ns,
                checkpoint_id=checkpoint_id,
                goal=str(values.get("goal") or plan_goal),
                status=status,
                state=run_state(status, interrupt, thread in holders),
                plan_version=version,
                steps=counts,
                updated_at=parse_ts(checkpoint.get("ts")),
                title=title,
                error=values.get("error") if isinstance(values.get("error"), str) else None,
            )
            if matches(row, wanted):
                out.append(row)
        return out
    finally:
        conn.close()


def matches(row: RunRow, wanted: frozenset[str] | None) -> bool:
    """Whether ``ls --status`` keeps ``row``: by its state (`RUN_STATES`), or by its stored status for a status
    that is no state (``new``, ``planning``): ``--status running`` keeps what ``ls`` shows as running."""
    if wanted is None:
        return True
    return row.state in wanted or (row.status in wanted and row.status not in RUN_STATES)


def wanted_states(status: str | None) -> frozenset[str] | None:
    """``ls --status``'s value as the statuses and states it keeps (spaces and dashes read as underscores);
    `ValueError` for a name that is neither."""
    if status is None:
        return None
    names = frozenset(s.strip().lower().replace(" ", "_").replace("-", "_") for s in status.split(","))
    known = set(RUN_STATUSES) | set(RUN_STATES)
    unknown = sorted(names - known)
    if unknown:
        raise ValueError(f"unknown run status {', '.join(map(repr, unknown))}; use one of {', '.join(sorted(known))}")
    return names
