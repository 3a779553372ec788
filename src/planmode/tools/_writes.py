"""The files a step writes, recorded by the workspace tools for the staleness check.

`run_executor` and `arun_executor` (`planmode.executors`) open a recorder around one executor call
(`recording`); a workspace tool that writes a file (`planmode.tools.workspace`) adds its real path and the
sha256 of the bytes it wrote (`record_write`); the executor's `StepOutcome` carries them (``writes``), verify
folds them into the state's ``run_writes``, and the staleness check does not report a file whose content is
still what the run last wrote there (`planmode.approval.staleness.outside_changes`).

The recorder is a context variable holding a dict: a tool run in a worker thread or an asyncio task copies the
context, so it adds to the same dict; parallel steps each run in their own context, so each step records only
its own writes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from planmode.state.models import clean_text

__all__ = ["path_key", "record_write", "recording"]

_RECORDER: ContextVar[dict[str, str] | None] = ContextVar("planmode_step_writes", default=None)


def path_key(path: str | Path) -> str:
    """The key a written file is recorded under: its real path, as text a checkpoint can store."""
    return clean_text(os.path.realpath(path))


def record_write(path: str | Path, data: bytes) -> None:
    """Record that ``data`` was written to ``path`` by the step running now (nothing outside a step)."""
    recorder = _RECORDER.get()
    if recorder is not None:
        recorder[path_key(path)] = hashlib.sha256(data).hexdigest()


@contextmanager
def recording() -> Iterator[dict[str, str]]:
    """Record the writes made inside the block (by this context and the ones copied from it)."""
    writes: dict[str, str] = {}
    token = _RECORDER.set(writes)
    try:
        yield writes
    finally:
        _RECORDER.reset(token)
