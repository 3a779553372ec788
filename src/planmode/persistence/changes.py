"""What each step changed in the workspace, kept beside the checkpoints: record it, show it, undo it.

Every write of a workspace tool (`planmode.tools.workspace`) made while a step runs is recorded *before* the
file is touched (a write that cannot be recorded is refused): the path, the content before and after, the
thread, the run, the step (and attempt) that made it, and the checkpoint its task ran from. Contents are stored
once by their sha256 (content-addressed). Two tables in the SQLite file of the checkpoints keep them:

- ``planmode_blobs(sha256, size, data)``: every content, once;
- ``planmode_changes``: one row per write, in order (``seq``), with the sha256 before (NULL: the file did not
  exist) and after, and ``reverted_at`` once a rollback undid it.

Only a SQLite checkpointer on a file has a place to keep them: with an in-memory or a PostgreSQL checkpointer
the run goes on as before, its changes are not recorded (a warning is logged once per checkpointer), and
``planmode diff`` says so.

Which changes a rollback undoes: those whose task ran from the checkpoint rolled back to or a later one
(checkpoint ids are ordered in time, as LangGraph orders them), not undone already. Each file goes back to the
content it had before the first of them (a file a step created is deleted), and only when its content is still
what planmode last wrote there: a file changed outside the run since is refused, with the list (`restore_plan`).

The journal is data, not an authority: a rollback restores files only inside the workspace it is given (the run's
own, from the thread's settings), never the ``root`` a row names. A recorded path is taken out of ``..`` and must
then lie inside that workspace, reached without a symlink (none at the path, none in a folder on the way), and
not be planmode's own data (the approval key, a ``.planmode`` folder) or git's (unless the run allowed git
writes). A row that fails this is skipped and reported (``RestorePlan.skipped``); the rest is restored, and every
file is written or deleted through folders opened one by one without following a symlink.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import logging
import os
import sqlite3
import stat
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from planmode.errors import PlanModeError
from planmode.tools._trusted import git_path, key_path, planmode_path

__all__ = [
    "BLOBS_TABLE",
    "CHANGES_TABLE",
    "Change",
    "ChangeStore",
    "FileDiff",
    "RestorePlan",
    "StepJournal",
    "astep_journal",
    "changes_database",
    "file_diffs",
    "restore",
    "restore_plan",
    "step_journal",
]

log = logging.getLogger("planmode")

CHANGES_TABLE = "planmode_changes"
BLOBS_TABLE = "planmode_blobs"

_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {BLOBS_TABLE} (sha256 TEXT PRIMARY KEY, size INTEGER NOT NULL, data BLOB NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {CHANGES_TABLE} ("
    "seq INTEGER PRIMARY KEY AUTOINCREMENT, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', "
    "checkpoint_id TEXT NOT NULL, run_id TEXT, step_id TEXT NOT NULL, attempt INTEGER NOT NULL DEFAULT 0, "
    "root TEXT NOT NULL, path TEXT NOT NULL, before_sha TEXT, after_sha TEXT, at REAL NOT NULL, reverted_at REAL)",
    f"CREATE INDEX IF NOT EXISTS {CHANGES_TABLE}_thread ON {CHANGES_TABLE} (thread_id, checkpoint_ns, seq)",
)

#: A side of a diff larger than this is not diffed (its sizes and hashes are shown instead).
DIFF_MAX_BYTES = 1_000_000


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Change:
    """One recorded write of a workspace tool."""

    seq: int
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    """The checkpoint the step's task ran from: the change is not in it, it is in every later one."""
    run_id: str | None
    step_id: str
    attempt: int
    root: str
    """The workspace root (a real path)."""
    path: str
    """The file (a real path, inside ``root``)."""
    before_sha: str | None
    """sha256 of the content before; None: the file did not exist."""
    after_sha: str | None
    """sha256 of the content written; None: the file was deleted."""
    at: float
    reverted_at: float | None

    @property
    def rel(self) -> str:
        """The path relative to the workspace root (the real path when it is not inside it)."""
        try:
            return Path(self.path).relative_to(self.root).as_posix()
        except ValueError:
            return self.path


class ChangeStore:
    """The two tables in one SQLite file. Each call opens its own short connection (safe from any thread, and
    beside the checkpointer's own connection: the file is in WAL mode). Reading never creates anything: a
    database without the tables has no changes."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)

    @contextlib.contextmanager
    def _connect(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        if write:
            conn = sqlite3.connect(self.path, timeout=30)
        else:  # read-only: a read never adds a table to the file, nor creates it
            conn = sqlite3.connect(f"file:{quote(self.path)}?mode=ro", uri=True, timeout=30)
        try:
            if write:
                for sql in _SCHEMA:
                    conn.execute(sql)
            with conn:
                yield conn
        finally:
            conn.close()

    def _has_tables(self, conn: sqlite3.Connection) -> bool:
        row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (CHANGES_TABLE,)).fetchone()
        return row is not None

    def record(
        self,
        *,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        run_id: str | None,
        step_id: str,
        attempt: int,
        root: str,
        path: str,
        before: bytes | None,
        after: bytes | None,
        before_sha: str | None = None,
    ) -> int:
        """Store one change (its contents once each) and return its ``seq``. ``before_sha`` without ``before``:
        the file existed but its content was too large to keep (a rollback cannot restore it)."""
        if before is not None:
            before_sha = sha256(before)
        after_sha = None if after is None else sha256(after)
        with self._connect(write=True) as conn:
            for data in (before, after):
                if data is not None:
                    conn.execute(
                        f"INSERT OR IGNORE INTO {BLOBS_TABLE} (sha256, size, data) VALUES (?, ?, ?)",
                        (sha256(data), len(data), data),
                    )
            cur = conn.execute(
                f"INSERT INTO {CHANGES_TABLE} (thread_id, checkpoint_ns, checkpoint_id, run_id, step_id, attempt, "
                "root, path, before_sha, after_sha, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    thread_id,
                    checkpoint_ns,
                    checkpoint_id,
                    run_id,
                    step_id,
                    attempt,
                    root,
                    path,
                    before_sha,
                    after_sha,
                    time.time(),
                ),
            )
            return int(cur.lastrowid or 0)

    def discard(self, seq: int) -> None:
        """Forget a change whose write failed (nothing was changed)."""
        with self._connect(write=True) as conn:
            conn.execute(f"DELETE FROM {CHANGES_TABLE} WHERE seq = ?", (seq,))

    def changes(
        self,
        thread_id: str,
        *,
        checkpoint_ns: str = "",
        run_id: str | None = None,
        step_id: str | None = None,
        since_checkpoint: str | None = None,
        include_reverted: bool = False,
    ) -> list[Change]:
        """The thread's changes in the order they were made, optionally of one run, one step, or made from
        ``since_checkpoint`` on; without the ones a rollback undid unless ``include_reverted``."""
        if not Path(self.path).is_file():
            return []
        sql = f"SELECT * FROM {CHANGES_TABLE} WHERE thread_id = ? AND checkpoint_ns = ?"
        args: list[Any] = [thread_id, checkpoint_ns]
        for column, value in (("run_id", run_id), ("step_id", step_id)):
            if value is not None:
                sql += f" AND {column} = ?"
                args.append(value)
        if since_checkpoint is not None:
            sql += " AND checkpoint_id >= ?"
            args.append(since_checkpoint)
        if not include_reverted:
            sql += " AND reverted_at IS NULL"
        with self._connect(write=False) as conn:
            if not self._has_tables(conn):
                return []
            conn.row_factory = sqlite3.Row
            rows = conn.execute(sql + " ORDER BY seq", args).fetchall()
        return [Change(**dict(zip(row.keys(), tuple(row), strict=True))) for row in rows]

    def content(self, sha: str | None) -> bytes | None:
        """The content stored under ``sha`` (None when it was not kept)."""
        if sha is None or not Path(self.path).is_file():
            return None
        with self._connect(write=False) as conn:
            if not self._has_tables(conn):
                return None
            row = conn.execute(f"SELECT data FROM {BLOBS_TABLE} WHERE sha256 = ?", (sha,)).fetchone()
        return None if row is None else bytes(row[0])

    def mark_reverted(self, seqs: Sequence[int]) -> None:
        """Record that a rollback undid these changes."""
        now = time.time()
        with self._connect(write=True) as conn:
            conn.executemany(f"UPDATE {CHANGES_TABLE} SET reverted_at = ? WHERE seq = ?", [(now, s) for s in seqs])


# -- the journal of the step running now ------------------------------------------------------------------


@dataclass(frozen=True)
class StepJournal:
    """Where the workspace tools record the changes of the step running now (`planmode.tools._writes`)."""

    store: ChangeStore
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    run_id: str | None
    step_id: str
    attempt: int

    def record(self, root: str, path: str, before: bytes | None, after: bytes | None, before_sha: str | None) -> int:
        return self.store.record(
            thread_id=self.thread_id,
            checkpoint_ns=self.checkpoint_ns,
            checkpoint_id=self.checkpoint_id,
            run_id=self.run_id,
            step_id=self.step_id,
            attempt=self.attempt,
            root=root,
            path=path,
            before=before,
            after=after,
            before_sha=before_sha,
        )

    def discard(self, ticket: int) -> None:
        self.store.discard(ticket)


#: The file of each SQLite checkpointer seen ("" for one in memory).
_FILES: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_WARNED: set[str] = set()


def _file_of(rows: Any) -> str:
    for row in rows:
        if row[1] == "main":
            return str(row[2] or "")
    return ""


def changes_database(saver: Any) -> str | None:
    """The SQLite file of a (sync) SQLite checkpointer, else None (in memory, PostgreSQL, any other saver)."""
    if saver in _FILES:
        return _FILES[saver] or None
    conn = getattr(saver, "conn", None)
    if not isinstance(conn, sqlite3.Connection):
        return None
    try:
        with getattr(saver, "lock", None) or contextlib.nullcontext():
            path = _file_of(conn.execute("PRAGMA database_list").fetchall())
    except (sqlite3.Error, TypeError):
        return None
    _FILES[saver] = path
    return path or None


async def achanges_database(saver: Any) -> str | None:
    """`changes_database` for an ``AsyncSqliteSaver`` too."""
    if saver in _FILES:
        return _FILES[saver] or None
    from planmode.persistence._savers import is_async_sqlite

    if not is_async_sqlite(saver):
        return changes_database(saver)
    try:
        async with saver.lock, saver.conn.execute("PRAGMA database_list") as cur:
            path = _file_of(await cur.fetchall())
    except (sqlite3.Error, TypeError, ValueError):
        return None
    _FILES[saver] = path
    return path or None


def _task_position() -> tuple[Any, str, str, str] | None:
    """(checkpointer, thread, namespace, checkpoint id the task runs from) of the task running now, or None."""
    from langgraph.config import get_config

    from planmode._compat import CONFIG_KEY_CHECKPOINT_MAP, CONFIG_KEY_CHECKPOINT_NS, CONFIG_KEY_CHECKPOINTER, NS_SEP

    try:
        conf = get_config().get("configurable") or {}
    except RuntimeError:  # not inside a run
        return None
    saver = conf.get(CONFIG_KEY_CHECKPOINTER)
    graph_ns = str(conf.get(CONFIG_KEY_CHECKPOINT_NS) or "").rpartition(NS_SEP)[0]
    checkpoint_id = (conf.get(CONFIG_KEY_CHECKPOINT_MAP) or {}).get(graph_ns)
    if saver is None or not conf.get("thread_id") or not checkpoint_id:
        return None
    return saver, str(conf["thread_id"]), graph_ns, str(checkpoint_id)


def _journal(
    position: tuple[Any, str, str, str], db: str | None, run_id: str | None, step_id: str, attempt: int
) -> StepJournal | None:
    saver, thread_id, ns, checkpoint_id = position
    if db is None:
        kind = type(saver).__name__
        if kind not in _WARNED:
            _WARNED.add(kind)
            log.warning(
                "planmode: the workspace changes of this run are not recorded (no `planmode diff`, no "
                "`planmode rollback --files`): the checkpointer is %s, and only a SQLite file keeps them",
                kind,
            )
        return None
    return StepJournal(ChangeStore(db), thread_id, ns, checkpoint_id, run_id, step_id, attempt)


def step_journal(run_id: str | None, step_id: str, attempt: int) -> StepJournal | None:
    """The journal of the step the current task runs (None outside a run, or without a SQLite file)."""
    position = _task_position()
    if position is None:
        return None
    return _journal(position, changes_database(position[0]), run_id, step_id, attempt)


async def astep_journal(run_id: str | None, step_id: str, attempt: int) -> StepJournal | None:
    """`step_journal` on the async path (an ``AsyncSqliteSaver`` is asked on its own connection)."""
    position = _task_position()
    if position is None:
        return None
    return _journal(position, await achanges_database(position[0]), run_id, step_id, attempt)


# -- diffs ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileDiff:
    """The net change of one file over some changes: its first content before and its last content after."""

    step_ids: tuple[str, ...]
    rel: str
    path: str
    before_sha: str | None
    after_sha: str | None
    before: bytes | None
    after: bytes | None

    @property
    def kind(self) -> str:
        """``created``, ``deleted`` or ``modified``."""
        if self.before_sha is None:
            return "created"
        return "deleted" if self.after_sha is None else "modified"

    def unified(self) -> str:
        """The unified diff (``a/`` and ``b/`` paths, as git writes them), or one line when it cannot be one."""
        old = _quoted(f"a/{self.rel}") if self.before_sha is not None else "/dev/null"
        new = _quoted(f"b/{self.rel}") if self.after_sha is not None else "/dev/null"
        head = f"--- {old}\n+++ {new}\n"
        if self.before_sha is not None and self.before is None:
            return f"{head}(the content before, sha256 {self.before_sha[:12]}, was too large to keep)\n"
        pairs = ((self.before_sha, self.before), (self.after_sha, self.after))
        sides = [b"" if sha is None else data for sha, data in pairs]
        if sides[0] is None or sides[1] is None:
            return f"{head}(content missing from the store)\n"
        before, after = sides[0], sides[1]
        if max(len(before), len(after)) > DIFF_MAX_BYTES:
            return (
                f"{head}(too large to show: {len(before)} -> {len(after)} bytes, "
                f"sha256 {(self.before_sha or '-')[:12]} -> {(self.after_sha or '-')[:12]})\n"
            )
        texts = [_text(before), _text(after)]
        if texts[0] is None or texts[1] is None:
            return f"Binary files {old} and {new} differ\n"
        lines = difflib.unified_diff(
            texts[0].splitlines(keepends=True), texts[1].splitlines(keepends=True), old, new, n=3
        )
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def _text(data: bytes) -> str | None:
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _quoted(path: str) -> str:
    """``path`` as git writes an unusual one: in double quotes with C escapes when it has a control character,
    a double quote or a backslash (a newline in a name cannot break the diff's header)."""
    if not any(c in '"\\' or ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        return path
    escapes = {"\n": "\\n", "\t": "\\t", "\r": "\\r", '"': '\\"', "\\": "\\\\"}

    def one(c: str) -> str:
        if c in escapes:
            return escapes[c]
        return f"\\{ord(c):03o}" if ord(c) < 0x20 or ord(c) == 0x7F else c

    return '"' + "".join(one(c) for c in path) + '"'


def file_diffs(store: ChangeStore, changes: Sequence[Change]) -> list[FileDiff]:
    """The net change of each file over ``changes``: by the step that first changed it (in the order the steps
    made changes), then by path. Not by the order of the writes themselves: a step's tool calls of one turn run
    in parallel, so that order is not the same from one run to the next."""
    first: dict[str, Change] = {}
    last: dict[str, Change] = {}
    steps: dict[str, list[str]] = {}
    for change in changes:
        first.setdefault(change.path, change)
        last[change.path] = change
        if change.step_id not in steps.setdefault(change.path, []):
            steps[change.path].append(change.step_id)
    step_rank: dict[str, int] = {}
    for change in changes:
        step_rank.setdefault(change.step_id, len(step_rank))
    out: list[FileDiff] = []
    for path, start in sorted(first.items(), key=lambda item: (step_rank[item[1].step_id], item[1].rel)):
        end = last[path]
        out.append(
            FileDiff(
                step_ids=tuple(steps[path]),
                rel=start.rel,
                path=path,
                before_sha=start.before_sha,
                after_sha=end.after_sha,
                before=store.content(start.before_sha),
                after=store.content(end.after_sha),
            )
        )
    return out


# -- restoring files --------------------------------------------------------------------------------------


@dataclass
class RestorePlan:
    """What a rollback to one checkpoint does to the workspace files."""

    writes: dict[str, bytes] = field(default_factory=dict)
    """Files given back their earlier content, by real path."""
    deletions: list[str] = field(default_factory=list)
    """Files a step created after that checkpoint (deleted)."""
    unchanged: list[str] = field(default_factory=list)
    """Files whose content is already what it was then (their changes are only marked undone)."""
    refused: dict[str, str] = field(default_factory=dict)
    """Files that cannot be restored, by path relative to the workspace: why (nothing is restored then)."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Recorded paths that are not the run's to restore, as recorded: why (outside the workspace, behind a symlink,
    planmode's or git's data). They are left as they are; the rest is restored."""
    seqs: dict[str, list[int]] = field(default_factory=dict)
    """The changes undone for each file (real path)."""
    rel: dict[str, str] = field(default_factory=dict)
    workspace: str = ""
    """The workspace every file is restored in (a real path)."""

    @property
    def empty(self) -> bool:
        return not (self.writes or self.deletions or self.refused or self.unchanged or self.skipped)


def current_sha(path: str) -> str | None:
    """sha256 of a regular file's content now; None when there is no file. Raises `OSError` when it is not
    a regular file (a directory, a FIFO, a symlink swapped in) or cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(f"{path} is not a regular file")
        digest = hashlib.sha256()
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _place(recorded: str, root: Path, allow_git: bool) -> tuple[str, ...] | str:
    """The parts (below ``root``) of the file a journal row names, or why it is not the run's to restore."""
    joined = Path(os.path.normpath(os.path.join(root, recorded)))  # ".." taken out; an absolute path stays itself
    if not joined.is_relative_to(root) or joined == root:
        return f"outside the workspace {root}"
    parts = joined.relative_to(root).parts
    here = root
    for part in parts:
        here = here / part
        if here.is_symlink():
            return f"{here.relative_to(root).as_posix()} is a symlink (a rollback follows none)"
    if planmode_path(joined, root, key_path()):
        return "planmode's own data (its database or its approval key)"
    if git_path(joined, root) and not allow_git:
        return "git's own data (the run did not allow git writes)"
    return parts


def restore_plan(
    store: ChangeStore,
    thread_id: str,
    checkpoint_id: str,
    *,
    workspace: str | Path,
    checkpoint_ns: str = "",
    allow_git_writes: bool = False,
) -> RestorePlan:
    """What restoring the files of ``workspace`` (the run's own, from the thread's settings) to checkpoint
    ``checkpoint_id`` takes (module docstring); nothing is changed. A recorded path that is not the run's to
    restore is skipped (`RestorePlan.skipped`). A file is refused when its content is not what planmode last
    wrote there (changed outside the run since), or its earlier content was not kept."""
    root = Path(os.path.realpath(workspace))
    plan = RestorePlan(workspace=str(root))
    changes = store.changes(thread_id, checkpoint_ns=checkpoint_ns, since_checkpoint=checkpoint_id)
    first: dict[str, Change] = {}
    last: dict[str, Change] = {}
    for change in changes:
        place = _place(change.path, root, allow_git_writes)
        if isinstance(place, str):
            plan.skipped.setdefault(change.path, place)
            continue
        path = str(root.joinpath(*place))
        first.setdefault(path, change)
        last[path] = change
        plan.seqs.setdefault(path, []).append(change.seq)
        plan.rel[path] = "/".join(place)
    for path, start in first.items():
        rel = plan.rel[path]
        try:
            now = current_sha(path)
        except OSError as exc:
            plan.refused[rel] = f"cannot be read ({exc.strerror or exc})"
            continue
        if now == start.before_sha:  # already as it was then (put back by hand): nothing to write
            plan.unchanged.append(path)
            continue
        if now != last[path].after_sha:
            what = "deleted" if now is None else "changed"
            plan.refused[rel] = f"{what} outside the run since planmode last wrote it"
            continue
        if start.before_sha is None:
            plan.deletions.append(path)
            continue
        data = store.content(start.before_sha)
        if data is None:
            plan.refused[rel] = "its earlier content was too large to keep"
            continue
        plan.writes[path] = data
    return plan


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
#: Whether folders can be walked by descriptor (POSIX): then no symlink swapped in after the plan is followed.
_BY_FD = {os.open, os.mkdir, os.unlink} <= os.supports_dir_fd


def _folder(root: str, parts: Sequence[str]) -> int:
    """A descriptor of the folder ``root/parts...``, each folder opened without following a symlink (a missing one
    is made); raises `OSError` at a symlink (ELOOP or ENOTDIR)."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            try:
                below = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(part, 0o755, dir_fd=fd)
                below = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd


def _put_back(root: str, rel: str, data: bytes | None) -> None:
    """Write ``data`` to ``root/rel`` (None: delete it), never through a symlink."""
    *folders, name = rel.split("/")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    if not _BY_FD:  # no descriptor-relative calls here: by path, the final component not followed
        path = os.path.join(root, *folders, name)
        if data is None:
            os.unlink(path)
            return
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with os.fdopen(os.open(path, flags, 0o644), "wb") as handle:
            handle.write(data)
        return
    folder = _folder(root, folders)
    try:
        if data is None:
            os.unlink(name, dir_fd=folder)
            return
        with os.fdopen(os.open(name, flags, 0o644, dir_fd=folder), "wb") as handle:
            handle.write(data)
    finally:
        os.close(folder)


def restore(store: ChangeStore, plan: RestorePlan) -> list[str]:
    """Carry out a `RestorePlan` with nothing refused (its skipped paths are left alone); each file's changes are
    marked undone as soon as it is restored (a failure half-way leaves a true record). Every file is written or
    deleted in the plan's workspace, through folders opened without following a symlink. Returns the files
    restored, relative to the workspace.

    Raises:
        PlanModeError: the plan has refused files, or a file could not be written (naming what was done).
    """
    if plan.refused:
        raise PlanModeError("refusing to restore files: " + "; ".join(f"{k}: {v}" for k, v in plan.refused.items()))
    done: list[str] = []
    for path in plan.unchanged:
        store.mark_reverted(plan.seqs[path])
    for path in [*plan.writes, *plan.deletions]:
        try:
            _put_back(plan.workspace, plan.rel[path], plan.writes.get(path))
        except OSError as exc:
            restored = ", ".join(done) or "none"
            raise PlanModeError(
                f"could not restore {plan.rel[path]}: {exc.strerror or exc} (restored so far: {restored}; "
                "the run was not rolled back)"
            ) from exc
        store.mark_reverted(plan.seqs[path])
        done.append(plan.rel[path])
    return done
