"""The files a step writes, recorded by the workspace tools for the staleness check.

`run_executor` and `arun_executor` (`planmode.executors`) open a recorder around one executor call
(`recording`); a workspace tool that writes a file (`planmode.tools.workspace`) adds its real path and the
sha256 of the bytes it wrote (`record_write`); the executor's `StepOutcome` carries them (``writes``), verify
folds them into the state's ``run_writes``, and the staleness check does not report a file whose content is
still what the run last wrote there (`planmode.approval.staleness.outside_changes`).

The recorder is a context variable holding a dict: a tool run in a worker thread or an asyncio task copies the
context, so it adds to the same dict; parallel steps each run in their own context, so each step records only
its own writes.

The step's change journal (`journaling`, opened by execute_step: `planmode.persistence.changes.StepJournal`) is
another context variable: a workspace tool records each change there, its content before and after, *before* it
writes (`record_change`); a change that cannot be recorded is not made.

Whether the step running now may write in git's data (`git_writes`, opened by execute_step with the run setting
``allow_git_writes``) is a third: the workspace tools refuse such a write unless it is on. The files a step may not
change (`keeping`: a done step's files and the task's input files, opened by the tool loop's gate around each call)
are a fourth: the workspace tools refuse a write whose resolved path is one of them, however the call spelled it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Protocol

from planmode.state.models import clean_text

__all__ = [
    "ChangeJournal",
    "discard_change",
    "git_writes",
    "git_writes_allowed",
    "journaling",
    "keeping",
    "kept_files",
    "kept_name",
    "path_key",
    "record_change",
    "record_write",
    "recording",
]

_RECORDER: ContextVar[dict[str, str] | None] = ContextVar("planmode_step_writes", default=None)


class ChangeJournal(Protocol):
    """Where the changes of the step running now are recorded (`planmode.persistence.changes.StepJournal`)."""

    def record(self, root: str, path: str, before: bytes | None, after: bytes | None, before_sha: str | None) -> int:
        """Record one change; returns a ticket for `discard`."""

    def discard(self, ticket: int) -> None:
        """Forget a recorded change that was not made after all."""


_JOURNAL: ContextVar[ChangeJournal | None] = ContextVar("planmode_step_journal", default=None)


def journal_open() -> bool:
    """Whether the changes made now are recorded (a step is running with a journal)."""
    return _JOURNAL.get() is not None


def record_change(
    root: str | Path, path: str | Path, before: bytes | None, after: bytes | None, before_sha: str | None = None
) -> tuple[ChangeJournal, int] | None:
    """Record a change about to be made (``before`` None: the file does not exist, or with ``before_sha`` its
    content is too large to keep; ``after`` None: it is deleted). Returns what `discard_change` takes, or None
    when no journal is open. An error of the journal propagates: the caller does not make the change."""
    journal = _JOURNAL.get()
    if journal is None:
        return None
    return journal, journal.record(path_key(root), path_key(path), before, after, before_sha)


def discard_change(ticket: tuple[ChangeJournal, int] | None) -> None:
    """Forget a change `record_change` recorded whose write then failed."""
    if ticket is not None:
        ticket[0].discard(ticket[1])


@contextmanager
def journaling(journal: ChangeJournal | None) -> Iterator[None]:
    """Record the changes of the workspace tools inside the block in ``journal`` (None: record none)."""
    token = _JOURNAL.set(journal)
    try:
        yield
    finally:
        _JOURNAL.reset(token)


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


_GIT_WRITES: ContextVar[bool] = ContextVar("planmode_git_writes", default=False)


def git_writes_allowed() -> bool:
    """Whether the step running now may write in git's data (off outside `git_writes`)."""
    return _GIT_WRITES.get()


@contextmanager
def git_writes(allowed: bool) -> Iterator[None]:
    """Let the workspace tools write in ``.git`` inside the block when ``allowed`` (the run setting
    ``allow_git_writes``); refused otherwise."""
    token = _GIT_WRITES.set(allowed is True)
    try:
        yield
    finally:
        _GIT_WRITES.reset(token)


_KEPT: ContextVar[frozenset[str]] = ContextVar("planmode_kept_files", default=frozenset())


def kept_files() -> frozenset[str]:
    """The files (relative to the workspace) the call running now may not change (none outside `keeping`)."""
    return _KEPT.get()


@contextmanager
def keeping(names: frozenset[str]) -> Iterator[None]:
    """Inside the block, the workspace tools refuse to write the files ``names`` (relative to their workspace)."""
    token = _KEPT.set(frozenset(names))
    try:
        yield
    finally:
        _KEPT.reset(token)


def kept_name(root: Path, path: str | Path, names: Iterable[str]) -> str | None:
    """The one of ``names`` (relative to ``root``) that ``path`` (relative to ``root``, or absolute) is once both are
    resolved as the workspace tools resolve a path (``..`` taken out, every symlink followed), or None."""
    try:
        target = (root / path).resolve()
        return next((name for name in names if (root / name).resolve() == target), None)
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL: the tool itself refuses such a path
        return None
