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
"""

from __future__ import annotations

import threading
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.sqlite import SqliteSaver

__all__ = ["SqliteCheckpointSaver", "needs_sync"]

#: Channels whose change alone does not need the file synced at once (the next synced checkpoint syncs it).
UNSYNCED_CHANNELS = frozenset({"step_outcomes"})


def needs_sync(new_versions: ChannelVersions) -> bool:
    """Whether a checkpoint that updated these channels is synced to disk before its commit returns: unless
    only executed outcomes and LangGraph's trigger channels (``branch:...``, ``__pregel_...``) changed."""
    return not new_versions or any(
        not (c in UNSYNCED_CHANNELS or c.startswith(("branch:", "__pregel_"))) for c in new_versions
    )


class SqliteCheckpointSaver(SqliteSaver):
    """A `SqliteSaver` that syncs a checkpoint to disk only when `needs_sync` says so (module docstring)."""

    def __init__(self, conn: Any, *, serde: Any = None) -> None:
        super().__init__(conn, serde=serde)
        self.lock = threading.RLock()  # type: ignore[assignment]  # put() holds it around SqliteSaver.put, which takes it again
        with self.lock:
            self.conn.execute("PRAGMA synchronous=NORMAL")

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint; sync it (and every commit before it) to disk first when `needs_sync`."""
        if not needs_sync(new_versions):
            return super().put(config, checkpoint, metadata, new_versions)
        with self.lock:
            self.conn.execute("PRAGMA synchronous=FULL")
            try:
                return super().put(config, checkpoint, metadata, new_versions)
            finally:
                self.conn.execute("PRAGMA synchronous=NORMAL")
