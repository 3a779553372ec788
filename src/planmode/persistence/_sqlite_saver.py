"""`SqliteCheckpointSaver`: LangGraph's `SqliteSaver` that syncs the file to disk only where it matters.

A layer of four parallel steps writes two checkpoints (after execute_step, after verify) and, before them,
five sets of pending writes (each execute_step task's outcome, verify's verdicts). `SqliteSaver` commits each
as its own transaction, and under SQLite's default ``synchronous=FULL`` every commit waits for an ``fsync``:
seven per layer, most of a run's time on a busy disk.

This saver commits with ``synchronous=NORMAL`` and syncs (``FULL``) the checkpoints that change anything
but executed, not yet verified step outcomes (``step_outcomes``) and LangGraph's own trigger channels. In
WAL mode (which `planmode.persistence.sqlite_checkpointer` sets) a NORMAL commit is written to the WAL file
but not synced: it survives the process being killed (SIGKILL: the operating system has the data), not a
power loss. A FULL commit syncs the WAL file, and with it every commit before it. So:

- every checkpoint that records a step done, a plan change, an approval or an edit is on disk when its
  commit returns, as before (`planmode.persistence.wait_until_durable` waits for that commit before a step
  starts, so a done step is durable before a step that depends on it starts, even against a power loss);
- everything survives a killed process, as before; after a power loss, what was written since the last
  synced checkpoint (pending writes, executed outcomes) may be lost, and those tasks run again on resume — as
  when the process dies during them (an executed step not yet verified may run again; a done step never).

A layer then syncs once, as a bare LangGraph loop with one checkpoint per layer does.

SQLite checkpoints store the whole state, the whole plan included, at every super-step. planmode's plan channel
stores the plan packed (`planmode._packed`, made once per plan object), so what this saver writes of it is small.
A plan kept as a `Plan` object in a plain channel (a graph of one's own) is encoded once and the encoding reused
while the channel is unchanged (the same object, and ``plan`` not among the checkpoint's updated channels); the
bytes written are the serializer's own.

Writes made while this process holds the thread's lease are fenced (`planmode.persistence.lease`): the fence is
installed on this saver's connection once a lease is held in the process, and a refused write raises `LeaseLostError`.
`fenced_async` gives an ``AsyncSqliteSaver`` class the same error.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Sequence
from typing import Any, TypeVar, cast

import ormsgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.sqlite import SqliteSaver

from planmode._compat import INTERNAL_CHANNEL_PREFIXES
from planmode.errors import LeaseLostError
from planmode.persistence._saves import SAVES, saved_key
from planmode.persistence.lease import install_sqlite_fence, may_hold, refused_write

__all__ = ["SqliteCheckpointSaver", "fenced_async", "needs_sync"]

#: Channels whose change alone does not need the file synced at once (the next synced checkpoint syncs it): the
#: executed, unverified outcomes and the usage their attempts reported (execute_step's super-step writes both; after
#: a power loss those attempts run again, and their usage is counted then).
UNSYNCED_CHANNELS = frozenset({"step_outcomes", "usage"})


def needs_sync(new_versions: ChannelVersions) -> bool:
    """Whether a checkpoint that updated these channels is synced to disk before its commit returns: unless
    only executed outcomes and LangGraph's trigger channels (``branch:...``, ``__pregel_...``) changed."""
    return not new_versions or any(
        not (c in UNSYNCED_CHANNELS or c.startswith(INTERNAL_CHANNEL_PREFIXES)) for c in new_versions
    )


class SqliteCheckpointSaver(SqliteSaver):
    """A `SqliteSaver` that syncs a checkpoint to disk only when `needs_sync` says so (module docstring), and
    announces each checkpoint it saved (`planmode.persistence._saves`), so a step waiting for it wakes at once."""

    announces_saves = True

    def announcing_saver(self) -> Any:
        """This saver (the announcing protocol of `planmode.persistence._saves.Announcing`)."""
        return self

    def __init__(self, conn: Any, *, serde: Any = None) -> None:
        super().__init__(conn, serde=serde)
        self.lock = threading.RLock()  # type: ignore[assignment]  # put() holds it around SqliteSaver.put, which takes it again
        self._plan: tuple[weakref.ref[Any], ormsgpack.Ext] | None = None
        self._fenced = False
        with self.lock:
            self.conn.execute("PRAGMA synchronous=NORMAL")

    def _fence(self, config: RunnableConfig) -> str:
        """The thread of a write; installs the lease's fence on this connection once a lease is held on it."""
        thread_id = str((config.get("configurable") or {}).get("thread_id", ""))
        if not self._fenced and may_hold(thread_id):
            install_sqlite_fence(self)
            self._fenced = True
        return thread_id

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Save a task's pending writes (refused with `LeaseLostError` when this process lost the lease)."""
        thread_id = self._fence(config)
        try:
            super().put_writes(config, writes, task_id, task_path)
        except sqlite3.IntegrityError as exc:
            lost = refused_write(exc, thread_id)
            if lost is None:
                raise
            raise lost from exc

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint; sync it (and every commit before it) to disk first when `needs_sync`. Refused with
        `LeaseLostError` when this process held the thread's lease and lost it."""
        thread_id = self._fence(config)
        try:
            saved = self._put(config, checkpoint, metadata, new_versions)
        except sqlite3.IntegrityError as exc:
            lost = refused_write(exc, thread_id)
            if lost is None:
                raise
            raise lost from exc
        SAVES.announce(saved_key(config, checkpoint["id"]))  # committed: wake a step waiting for it
        return saved

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        checkpoint = self._with_encoded_plan(checkpoint, new_versions)
        if not needs_sync(new_versions):
            return super().put(config, checkpoint, metadata, new_versions)
        with self.lock:
            self.conn.execute("PRAGMA synchronous=FULL")
            try:
                return super().put(config, checkpoint, metadata, new_versions)
            finally:
                self.conn.execute("PRAGMA synchronous=NORMAL")

    def _with_encoded_plan(self, checkpoint: Checkpoint, new_versions: ChannelVersions) -> Checkpoint:
        """``checkpoint`` with its plan replaced by the plan's encoding (an ``ormsgpack.Ext``, which the
        serializer writes as it is), computed once per plan object; unchanged when this cannot apply."""
        values = checkpoint.get("channel_values") or {}
        plan = values.get("plan")
        if plan is None or isinstance(plan, dict | str | bytes):
            return checkpoint
        cached = self._plan
        if cached is not None and cached[0]() is plan and "plan" not in new_versions:
            encoded = cached[1]
        else:
            encoded_or_none = _as_ext(self.serde.dumps_typed(plan))
            try:
                ref = weakref.ref(plan)
            except TypeError:  # not weakly referable: no cache
                return checkpoint
            if encoded_or_none is None:
                return checkpoint
            encoded = encoded_or_none
            self._plan = (ref, encoded)
        return {**checkpoint, "channel_values": {**values, "plan": encoded}}


_FENCED: dict[type, type] = {}
_Saver = TypeVar("_Saver")


def fenced_async(saver_class: type[_Saver]) -> type[_Saver]:
    """A subclass of an ``AsyncSqliteSaver`` class whose writes refused by the lease's fence (the trigger that
    `planmode.persistence.lease` installs on the connection of a leased saver) raise `LeaseLostError`."""
    made = _FENCED.get(saver_class)
    if made is None:
        made = type(f"Fenced{saver_class.__name__}", (_AsyncFenceErrors, saver_class), {"__module__": __name__})
        _FENCED[saver_class] = made
    return cast("type[_Saver]", made)  # a subclass of saver_class


class _AsyncFenceErrors:
    """Mixin (first in the bases) for an async SQLite saver: a write the fence refused is a `LeaseLostError`."""

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> RunnableConfig:
        try:
            return await super().aput(config, checkpoint, metadata, new_versions)  # type: ignore[misc,no-any-return]  # a mixin
        except sqlite3.IntegrityError as exc:
            lost = _lost(exc, config)
            if lost is None:
                raise
            raise lost from exc

    async def aput_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        try:
            await super().aput_writes(config, writes, task_id, task_path)  # type: ignore[misc]  # a mixin
        except sqlite3.IntegrityError as exc:
            lost = _lost(exc, config)
            if lost is None:
                raise
            raise lost from exc

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune the threads' checkpoints (LangGraph's ``BaseCheckpointSaver.aprune``, which the LangGraph server
        calls to bound storage): ``"keep_latest"`` keeps the newest checkpoint of each namespace of each thread and
        its pending writes, ``"delete"`` removes every checkpoint and write. No planmode channel is a DeltaChannel,
        so the checkpoint kept holds the whole state.

        Raises:
            TypeError: ``thread_ids`` is a single string.
            ValueError: an unknown strategy.
        """
        if isinstance(thread_ids, str):
            raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: keep_latest or delete")
        threads = [str(t) for t in thread_ids]
        if not threads:
            return
        marks = ",".join("?" * len(threads))
        stale = (
            f"thread_id IN ({marks})"
            if strategy == "delete"
            else f"thread_id IN ({marks}) AND checkpoint_id < (SELECT MAX(k.checkpoint_id) FROM checkpoints k "
            "WHERE k.thread_id = {t}.thread_id AND k.checkpoint_ns = {t}.checkpoint_ns)"
        )
        saver: Any = self
        async with saver.lock, saver.conn.cursor() as cur:
            await cur.execute(f"DELETE FROM writes WHERE {stale.format(t='writes')}", threads)
            await cur.execute(f"DELETE FROM checkpoints WHERE {stale.format(t='checkpoints')}", threads)
            await saver.conn.commit()

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints the given runs wrote (their metadata's ``run_id``) and their writes
        (LangGraph's ``BaseCheckpointSaver.adelete_for_runs``: the server removes a rolled-back run's checkpoints)."""
        runs = [str(r) for r in run_ids]
        if not runs:
            return
        marks = ",".join("?" * len(runs))
        of_runs = f"json_extract(CAST(metadata AS TEXT), '$.run_id') IN ({marks})"
        saver: Any = self
        async with saver.lock, saver.conn.cursor() as cur:
            await cur.execute(
                "DELETE FROM writes WHERE (thread_id, checkpoint_ns, checkpoint_id) IN "
                f"(SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints WHERE {of_runs})",
                runs,
            )
            await cur.execute(f"DELETE FROM checkpoints WHERE {of_runs}", runs)
            await saver.conn.commit()


def _lost(exc: BaseException, config: Any) -> LeaseLostError | None:
    """The `LeaseLostError` a refused write is, else None."""
    return refused_write(exc, str(((config or {}).get("configurable") or {}).get("thread_id", "")))


def _as_ext(typed: tuple[str, bytes]) -> ormsgpack.Ext | None:
    """The msgpack extension value ``typed`` encodes (e.g. the serializer's encoding of a pydantic model),
    to embed as it is in a larger message; None when it is not one."""
    kind, data = typed
    if kind != "msgpack" or not data:
        return None
    head = data[0]
    fixed = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}
    if head in fixed:
        size, start = fixed[head], 1
    elif head in (0xC7, 0xC8, 0xC9):
        width = {0xC7: 1, 0xC8: 2, 0xC9: 4}[head]
        size, start = int.from_bytes(data[1 : 1 + width], "big"), 1 + width
    else:
        return None
    code = int.from_bytes(data[start : start + 1], "big", signed=True)
    body = data[start + 1 :]
    if len(body) != size:
        return None
    return ormsgpack.Ext(code, body)
