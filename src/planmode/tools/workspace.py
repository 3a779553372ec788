"""File tools confined to one workspace directory: list, read and search (read-only); write and edit.

    tools = workspace_tools("/path/to/project")            # all five
    tools = read_only_workspace_tools("/path/to/project")  # list_files, read_file, search_files

Every path argument is resolved against the workspace root with every symlink followed; a path that ends
up outside the root (an absolute path elsewhere, ``..`` out of it, a symlink anywhere along the way that
leads out, even a dangling one) is refused with a `WorkspaceError` naming the path and the workspace.
The tools are built with ``handle_tool_error=True`` and ``handle_validation_error``, so a refusal, a
missing file or bad arguments come back as the tool's result (a ``ToolMessage`` with ``status="error"``
when called with a tool call) instead of an exception: an expected failure is a value the agent acts on.

Hostile arguments come back as results too: a lone surrogate in a path or in text is refused (it is not
text that can be written or shown), a search is bounded in time (`WorkspaceLimits.search_seconds`: the
``regex`` engine's timeout stops a catastrophically backtracking pattern), and only regular files are read
or written (a FIFO, a socket or a device is refused, checked on the opened descriptor, so nothing blocks).
Text the tools return never contains a lone surrogate (a file name that is not valid UTF-8 is shown with
``\\udcXX`` escapes), so a checkpoint that stores a tool's result can always be written.

**Changes are recorded.** While a step runs with a change journal (execute_step opens one on a SQLite
checkpointer), each write is recorded with the file's content before and after *before* it is made, and a write
that cannot be recorded is refused (`planmode.persistence.changes`: ``planmode diff``, ``rollback --files``).

**Protected paths.** planmode's own data is refused by every tool, reads included, and is not listed or
searched: every ``.planmode/`` folder in the workspace, the approval key file (`planmode.approval_key.key_file`,
wherever the workspace is), every path given as ``protected`` (the CLI passes its database), and the SQLite file
of the checkpointer of the run a tool is called in; each database file with its SQLite ``-wal``, ``-shm`` and
``-journal`` companions and planmode's ``.edit-lock``. The agent cannot read the key that seals approvals, nor
read or destroy the run history it is recorded in (`planmode.tools._trusted`).

**Git's data.** ``write_file`` and ``edit_file`` refuse every path in a ``.git`` folder (or a ``.git`` file) at any
depth, however it is spelled (``./x/../.git/config``, a symlink into it): git runs its hooks and the commands its
config names. Reading is allowed; writing only with ``allow_git_writes`` (the tools' argument, or the run setting
of the step that runs them: `planmode.tools._writes.git_writes`).

Limits of the guarantee: the check is made when the tool runs, so it does not defend against another
process swapping a directory for a symlink between the check and the access (writes do refuse a symlink
in the final component, with ``O_NOFOLLOW``); and a hard link inside the workspace to a file elsewhere is
indistinguishable from an ordinary file.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import functools
import hashlib
import itertools
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import regex
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.config import get_config
from pydantic import BaseModel, Field, ValidationError

from planmode._compat import CONFIG_KEY_CHECKPOINTER
from planmode.errors import PlanModeError
from planmode.text import clip
from planmode.tools._trusted import PLANMODE_DIR, git_path, key_path, planmode_path
from planmode.tools._writes import (
    discard_change,
    git_writes_allowed,
    journal_open,
    kept_files,
    kept_name,
    record_change,
    record_write,
)

__all__ = [
    "IDEMPOTENT_METADATA_KEY",
    "OWN_FILES_METADATA_KEY",
    "READ_ONLY_METADATA_KEY",
    "WORKSPACE_ROOT_METADATA_KEY",
    "WorkspaceError",
    "WorkspaceLimits",
    "read_only_workspace_tools",
    "unescape_lines",
    "unwrap_python",
    "workspace_root",
    "workspace_tools",
]

READ_ONLY_METADATA_KEY = "planmode_read_only"
"""Key in ``BaseTool.metadata`` that marks a tool as read-only (``True``) or not."""

IDEMPOTENT_METADATA_KEY = "planmode_idempotent"
"""Set on a tool whose call, repeated with the same arguments right after it succeeded, changes nothing
(``write_file``): the tool loop does not run such a repeat (`planmode.tools.loop`)."""

WORKSPACE_ROOT_METADATA_KEY = "planmode_workspace_root"
"""Key in ``BaseTool.metadata`` of the workspace tools: the workspace root (a real path), where verify and finalize
run the steps' declared checks (`planmode.nodes._evidence`)."""


def workspace_root(tools: Iterable[BaseTool]) -> Path | None:
    """The workspace the graph's workspace tools work in (`workspace_tools`), or None."""
    for tool in tools:
        root = (tool.metadata or {}).get(WORKSPACE_ROOT_METADATA_KEY)
        if isinstance(root, str) and root:
            return Path(root)
    return None


OWN_FILES_METADATA_KEY = "planmode_own_files"
"""Key in ``BaseTool.metadata`` of the workspace tools: planmode's own files and folders in the workspace (its
``.planmode/`` folder, the protected database and its companions), which the staleness check never reports."""

_SKIPPED_DIRS = frozenset({".git", "__pycache__", "node_modules", ".venv"})
"""Directories that recursive listing and search show but do not descend into (they can be named directly)."""

_SNIFF_BYTES = 8192
#: Characters of a file shown with an edit_file error that needs its text (old_string not found, or no change).
_EDIT_SHOWN = 1500
_EDIT_CUT = "\n…[the rest not shown: read_file reads it]"

#: Files beside the database that belong to it: SQLite's own, and planmode's per-thread edit lock
#: (`planmode.persistence.edit.edit_lock`): an agent that deleted or replaced it would let two edits race.
_SQLITE_COMPANIONS = ("-wal", "-shm", "-journal", ".edit-lock")


@functools.lru_cache(maxsize=64)
def _database_files(entry: str | Path) -> frozenset[Path]:
    """A database file and its companions (`_SQLITE_COMPANIONS`), as real paths."""
    target = Path(entry).expanduser().resolve()
    return frozenset([target, *(target.with_name(target.name + c) for c in _SQLITE_COMPANIONS)])


def _run_database_files() -> frozenset[Path]:
    """The SQLite file (with its companions) of the checkpointer of the run a tool is called in; empty outside a
    run, or when the checkpointer keeps no SQLite file that it names (in memory, PostgreSQL)."""
    try:
        saver = (get_config().get("configurable") or {}).get(CONFIG_KEY_CHECKPOINTER)
    except RuntimeError:  # not called inside a run
        return frozenset()
    if saver is None:
        return frozenset()
    from planmode.persistence.changes import changes_database  # at call time: persistence imports the tools' layer

    try:
        db = changes_database(saver)
    except TypeError:  # a checkpointer that cannot be a weak key (unhashable): it names no SQLite file
        return frozenset()
    return _database_files(db) if db else frozenset()


_Protected = tuple[Path | None, frozenset[Path]]
#: The approval key and the run's database files (`_protected_now`) for the tool call running now: found once
#: per call (`_guarded`), not once per file a listing or a search looks at.
_CALL_PROTECTED: ContextVar[_Protected | None] = ContextVar("planmode_call_protected", default=None)


def _protected_now() -> _Protected:
    """The approval key file and the run's database files, as real paths, as they are now."""
    return key_path(), _run_database_files()


class WorkspaceError(PlanModeError, ToolException):
    """A workspace tool refused or failed an access; its message is what the agent sees.

    A `ToolException`, so tools built with ``handle_tool_error=True`` return the message as their result.
    """


@dataclass(frozen=True, kw_only=True)
class WorkspaceLimits:
    """Bounds on what the workspace tools read, return and write."""

    max_entries: int = 200
    """At most this many entries from one `list_files` call."""
    max_read_chars: int = 50_000
    """At most this many characters of file content from one `read_file` call."""
    max_matches: int = 100
    """At most this many matching lines from one `search_files` call."""
    max_match_chars: int = 200
    """A matching line longer than this is cut in `search_files` results."""
    max_file_bytes: int = 10_000_000
    """`read_file` and `edit_file` refuse, and `search_files` skips, files larger than this."""
    max_write_bytes: int = 1_000_000
    """`write_file` and `edit_file` refuse to leave a file larger than this (UTF-8 bytes)."""
    search_seconds: float = 2.0
    """One `search_files` call stops after about this long (a pattern that backtracks catastrophically is cut
    off by the regex engine's timeout) and says so in its result."""


class ListFilesArgs(BaseModel):
    path: str = Field(default=".", description="Directory to list, relative to the workspace root.")
    pattern: str | None = Field(
        default=None, description="Glob matched against entry names or relative paths, e.g. '*.py'."
    )
    recursive: bool = Field(default=False, description="Also list the contents of subdirectories.")


class ReadFileArgs(BaseModel):
    path: str = Field(description="File to read, relative to the workspace root.")
    start_line: int | None = Field(default=None, ge=1, description="First line to return (1-based).")
    end_line: int | None = Field(default=None, ge=1, description="Last line to return (inclusive).")


class SearchFilesArgs(BaseModel):
    pattern: str = Field(description="Regular expression (or plain text with literal=true) to look for.")
    path: str = Field(default=".", description="Directory (or file) to search, relative to the root.")
    glob: str | None = Field(default=None, description="Only search files whose name matches, e.g. '*.py'.")
    literal: bool = Field(default=False, description="Treat pattern as plain text, not a regex.")
    ignore_case: bool = Field(default=False, description="Match case-insensitively.")


class WriteFileArgs(BaseModel):
    path: str = Field(description="File to write, relative to the workspace root; parents are created.")
    content: str = Field(description="The complete new content of the file.")


class EditFileArgs(BaseModel):
    path: str = Field(description="File to edit, relative to the workspace root.")
    old_string: str = Field(description="Exact text to replace; must occur exactly once unless replace_all.")
    new_string: str = Field(description="Replacement text.")
    replace_all: bool = Field(default=False, description="Replace every occurrence of old_string.")


class _Workspace:
    """The confined file operations behind the tools; every public method returns the tool's text."""

    def __init__(
        self,
        root: str | Path,
        limits: WorkspaceLimits,
        protected: Iterable[str | Path] = (),
        *,
        allow_git_writes: bool = False,
    ) -> None:
        resolved = Path(root).resolve()
        if not resolved.is_dir():
            raise WorkspaceError(f"workspace root {str(root)!r} is not an existing directory; create it first")
        self.root = resolved
        self.limits = limits
        self.allow_git_writes = allow_git_writes
        self.protected_dirs = [resolved / PLANMODE_DIR]
        self.protected_files = frozenset(p for entry in protected for p in _database_files(entry))

    def own_files(self) -> list[str]:
        """planmode's own folder and the protected files, as real paths."""
        return sorted(str(p) for p in {*self.protected_dirs, *self.protected_files})

    def is_protected(self, resolved: Path) -> bool:
        """Whether a resolved path is planmode's: a ``.planmode`` folder, the approval key, a protected file (the
        database given), or the database of the run the tool is called in (`planmode.tools._trusted`)."""
        key, run_files = _CALL_PROTECTED.get() or _protected_now()
        return (
            resolved in self.protected_files
            or resolved in run_files
            or planmode_path(resolved, self.root, key)  # <root>/.planmode (protected_dirs) among them
        )

    def _writable(self, path: str, resolved: Path) -> None:
        """Refuse a write into git's data unless allowed (by the tools' argument or the step's run setting), and a
        write to a file the calling step may not change (a done step's, the task's input: `keeping`)."""
        if git_path(resolved, self.root) and not (self.allow_git_writes or git_writes_allowed()):
            raise WorkspaceError(
                f"refused to write {path!r}: it is in git's own data ({self._rel(resolved)}), where hooks and "
                "config run commands; nothing was written (the run setting allow_git_writes allows it)"
            )
        kept = kept_name(self.root, resolved, kept_files())
        if kept is not None:
            raise WorkspaceError(
                f"refused to write {path!r}: it is {kept}, the work of a step that is done, or a file the task gives "
                "to read; this step does not declare it (only a step with a file check on it may change it)"
            )

    # -- confinement ---------------------------------------------------------------------------------

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` (relative to the root), refused unless it lies inside the root."""
        if "\x00" in path:
            raise WorkspaceError(f"refused {path!r}: a path cannot contain a NUL character")
        _require_text("path", path)
        given = Path(path)
        candidate = given if given.is_absolute() else self.root / given
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop, before Python 3.13
            raise WorkspaceError(f"cannot resolve {path!r} in the workspace {self.root}: {exc}") from exc
        if not resolved.is_relative_to(self.root):
            raise WorkspaceError(
                f"refused {path!r}: it resolves to {resolved}, outside the workspace {self.root} "
                "(paths must stay inside the workspace: no '..' out of it, no absolute paths elsewhere, "
                "no symlinks leading out)"
            )
        if self.is_protected(resolved):
            raise WorkspaceError(
                f"refused {path!r}: it is planmode's own data (its run database, a {PLANMODE_DIR}/ folder or its "
                "approval key), which the workspace tools never read or change"
            )
        return resolved

    def _hidden(self, path: Path) -> str | None:
        """Why a listed or searched entry is not accessible (outside, or planmode's data), or None."""
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):
            return "symlink outside the workspace; not accessible"
        if not resolved.is_relative_to(self.root):
            return "symlink outside the workspace; not accessible"
        if self.is_protected(resolved):
            return "planmode's data; not accessible"
        return None

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _file(self, path: str) -> Path:
        resolved = self.resolve(path)
        if resolved.is_dir():
            raise WorkspaceError(f"{path!r} is a directory, not a file (workspace {self.root})")
        if not resolved.exists():
            within = self._within_root_named(path)
            if within is not None:
                return within
            raise WorkspaceError(f"no such file: {path!r} (workspace {self.root})")
        return resolved

    def _within_root_named(self, path: str) -> Path | None:
        """The existing file ``path`` names when it starts with a folder called "workspace" (or the root's own
        name) that the workspace does not have: 'workspace/app.py' names the workspace's app.py. None when the
        workspace has such a folder or the rest names no file. Only for a file that must exist (a read, an edit):
        a write goes where it says."""
        given = Path(path)
        parts = given.parts
        if given.is_absolute() or len(parts) < 2 or parts[0] not in ("workspace", self.root.name):
            return None
        if (self.root / parts[0]).exists():
            return None
        inner = self.resolve(str(Path(*parts[1:])))
        return inner if inner.is_file() else None

    def _not_regular(self, path: str, mode: int) -> WorkspaceError:
        return WorkspaceError(
            f"refused {path!r}: it is {_kind(mode)}, not a regular file; only regular files can be read or written"
        )

    def _read_text(self, path: str, resolved: Path) -> str:
        # Non-blocking and without following a symlink swapped in since `resolve`: opening a FIFO returns at
        # once, and the descriptor's own type decides (a check on the path could be raced).
        fd = os.open(resolved, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise self._not_regular(path, info.st_mode)
            if info.st_size > self.limits.max_file_bytes:
                raise WorkspaceError(
                    f"{path!r} is too large ({info.st_size} bytes, limit {self.limits.max_file_bytes}); "
                    "use search_files to find what you need in it"
                )
            data = handle.read(self.limits.max_file_bytes + 1)
        if len(data) > self.limits.max_file_bytes:
            raise WorkspaceError(f"{path!r} is too large (limit {self.limits.max_file_bytes} bytes)")
        if b"\x00" in data[:_SNIFF_BYTES]:
            raise WorkspaceError(f"{path!r} is a binary file; only text files can be read or edited")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WorkspaceError(f"{path!r} is not UTF-8 text (binary?); it cannot be read or edited") from exc

    def _walk(self, top: Path, recursive: bool) -> Iterator[Path]:
        """Entries under ``top`` in sorted order, without following directory symlinks."""
        if not recursive:
            yield from sorted(top.iterdir())
            return
        for dirpath, dirnames, filenames in os.walk(top):
            base = Path(dirpath)
            for name in sorted([*dirnames, *filenames]):
                yield base / name
            dirnames[:] = sorted(
                d for d in dirnames if d not in _SKIPPED_DIRS and not self.is_protected(base.resolve() / d)
            )

    # -- the tools -----------------------------------------------------------------------------------

    def list_files(self, path: str = ".", pattern: str | None = None, recursive: bool = False) -> str:
        top = self.resolve(path)
        if not top.is_dir():
            raise WorkspaceError(f"{path!r} is not a directory (workspace {self.root})")
        lines: list[str] = []
        limit = self.limits.max_entries
        for entry in self._walk(top, recursive):
            rel_to_top = entry.relative_to(top).as_posix()
            if pattern and not (fnmatch.fnmatch(entry.name, pattern) or fnmatch.fnmatch(rel_to_top, pattern)):
                continue
            if len(lines) == limit:
                lines.append(f"[truncated: showing the first {limit} entries; narrow the path or pattern]")
                break
            shown = self._rel(entry)
            hidden = self._hidden(entry)
            if hidden is not None:
                lines.append(f"{shown} ({hidden})")
            else:
                lines.append(f"{shown}/" if entry.is_dir() else shown)
        if not lines:
            said = f"No entries in {path!r}" + (f" matching {pattern!r}" if pattern else "")
            if pattern:  # a pattern that matched nothing (a regex, a folder name) gets what the folder holds
                held = [
                    self._rel(e) + ("/" if e.is_dir() else "") for e in itertools.islice(self._walk(top, False), 20)
                ]
                if held:
                    said += f" (the pattern is a glob such as '*.py'; {path!r} holds: {', '.join(held)})"
            return said
        return "\n".join(lines)

    def read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        start = start_line or 1
        if end_line is not None and end_line < start:
            raise WorkspaceError(f"end_line ({end_line}) is before start_line ({start})")
        resolved = self._file(path)
        lines = _split_lines(self._read_text(path, resolved))
        if not lines:
            return f"({path!r} is empty)"
        if start > len(lines):
            raise WorkspaceError(f"start_line {start} is past the end of {path!r} ({len(lines)} lines)")
        end = min(end_line or len(lines), len(lines))
        budget = self.limits.max_read_chars
        out: list[str] = []
        last = start - 1
        for number in range(start, end + 1):
            line = lines[number - 1]
            if len(line) > budget:
                if not out:  # one huge line: return the part that fits
                    out.append(line[:budget])
                break
            out.append(line)
            budget -= len(line)
            last = number
        text = "".join(out)
        if last < end:
            shown = f"lines {start}-{last}" if last >= start else f"the first characters of line {start}"
            text += (
                f"\n[truncated at {self.limits.max_read_chars} characters: showed {shown} of {len(lines)}; "
                f"call read_file with start_line={max(last + 1, start + 1)} to continue]"
            )
        return text

    def search_files(
        self,
        pattern: str,
        path: str = ".",
        glob: str | None = None,
        literal: bool = False,
        ignore_case: bool = False,
    ) -> str:
        _require_text("pattern", pattern)
        if glob is not None:
            _require_text("glob", glob)
        deadline = time.monotonic() + self.limits.search_seconds
        try:
            # The `regex` engine (V0: the syntax of the standard `re`) takes a timeout, which `re` does not.
            compiled = regex.compile(
                regex.escape(pattern) if literal else pattern, regex.IGNORECASE if ignore_case else 0
            )
        except (regex.error, ValueError, OverflowError, RecursionError) as exc:
            raise WorkspaceError(f"invalid regex {pattern!r}: {exc} (pass literal=true for plain text)") from exc
        top = self.resolve(path)
        files = [top] if top.is_file() else (p for p in self._walk(top, recursive=True) if p.is_file())
        matches: list[str] = []
        limit = self.limits.max_matches

        def out_of_time() -> str:
            found = "\n".join(matches) + "\n" if matches else ""
            return (
                f"{found}[stopped: the search took longer than {self.limits.search_seconds:g} s and was cut "
                f"off with {len(matches)} match(es) found; if the pattern nests repetitions such as "
                "'(a+)+', simplify it, or narrow the path or glob]"
            )

        for file in files:
            if glob and not fnmatch.fnmatch(file.name, glob):
                continue
            if self._hidden(file) is not None:
                continue
            if time.monotonic() > deadline:
                return out_of_time()
            try:
                text = self._read_text(self._rel(file), file)
            except (WorkspaceError, OSError):  # binary, not UTF-8, too large, not regular, unreadable: skipped
                continue
            for number, line in enumerate(_split_lines(text), start=1):
                line = line.rstrip("\r\n")
                try:
                    hit = compiled.search(line, timeout=max(0.001, deadline - time.monotonic()))
                except TimeoutError:
                    return out_of_time()
                if hit:
                    if len(matches) == limit:
                        matches.append(f"[truncated: stopped at {limit} matches; narrow the path, glob or pattern]")
                        return "\n".join(matches)
                    matches.append(f"{self._rel(file)}:{number}: {line[: self.limits.max_match_chars]}")
        return "\n".join(matches) if matches else f"No matches for {pattern!r} under {path!r}"

    def write_file(self, path: str, content: str) -> str:
        _require_text("content", content)
        content, unwrapped = unwrap_python(path, content)
        if not unwrapped:
            content, unwrapped = unescape_lines(path, content)
        data = content.encode("utf-8")
        self._check_size(path, len(data))
        resolved = self.resolve(path)
        if resolved.is_dir():
            raise WorkspaceError(f"{path!r} is a directory, not a file (workspace {self.root})")
        existed = resolved.exists()
        if existed and not resolved.is_file():
            raise self._not_regular(path, resolved.stat().st_mode)
        self._writable(path, resolved)
        resolved.parent.mkdir(parents=True, exist_ok=True)
        self._write(path, resolved, data)
        done = f"{'Overwrote' if existed else 'Created'} {self._rel(resolved)} ({len(data)} bytes)"
        return done + (f"; {unwrapped}" if unwrapped else "")

    def edit_file(self, path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
        _require_text("old_string", old_string)
        _require_text("new_string", new_string)
        if not old_string:
            raise WorkspaceError("old_string is empty; use write_file to write a whole file")
        resolved = self._file(path)
        text = self._read_text(path, resolved)
        # the file as it is, with the error: a model that never read it gets what to copy into old_string
        shown = f"; {path} now reads:\n{clip(text, _EDIT_SHOWN, marker=_EDIT_CUT, fold=False)}"
        if old_string == new_string:
            raise WorkspaceError(f"old_string and new_string are identical; nothing to change{shown}")
        count = text.count(old_string)
        if count == 0:
            raise WorkspaceError(f"old_string was not found in {path!r}; copy the text to replace exactly{shown}")
        if count > 1 and not replace_all:
            raise WorkspaceError(
                f"old_string occurs {count} times in {path!r}; include more surrounding text to make it "
                "unique, or pass replace_all=true"
            )
        data = text.replace(old_string, new_string).encode("utf-8")
        self._check_size(path, len(data))
        self._write(path, resolved, data)
        return f"Replaced {count} occurrence{'s' if count > 1 else ''} in {self._rel(resolved)}"

    def _check_size(self, path: str, size: int) -> None:
        if size > self.limits.max_write_bytes:
            raise WorkspaceError(
                f"refused to write {path!r}: {size} bytes is over the limit of {self.limits.max_write_bytes}"
            )

    def _before(self, resolved: Path) -> tuple[bytes | None, str | None]:
        """The content of a file about to be written, for the step's change journal: (None, None) when there is
        no regular file there, (None, sha256) when it is too large to keep (`WorkspaceLimits.max_file_bytes`)."""
        try:
            fd = os.open(resolved, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            return None, None
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None, None  # the write refuses it
            data = handle.read(self.limits.max_file_bytes + 1)
            if len(data) <= self.limits.max_file_bytes:
                return data, None
            digest = hashlib.sha256(data)
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        return None, digest.hexdigest()

    def _write(self, path: str, resolved: Path, data: bytes) -> None:
        self._writable(path, resolved)  # every write passes here: git's data is refused unless allowed
        # Recorded first (planmode.persistence.changes): a change the step's journal cannot record is not made.
        ticket = None
        if journal_open():
            before, before_sha = self._before(resolved)
            try:
                ticket = record_change(self.root, resolved, before, data, before_sha)
            except Exception as exc:  # the journal's database failed: refuse the write, change nothing
                raise WorkspaceError(
                    f"refused to write {path!r}: the change could not be recorded for undo ({type(exc).__name__}: "
                    f"{exc}); nothing was written"
                ) from exc
        try:
            self._write_bytes(path, resolved, data)
        except BaseException:
            with contextlib.suppress(Exception):  # the record of a change not made; the write's error is what counts
                discard_change(ticket)
            raise

    def _write_bytes(self, path: str, resolved: Path, data: bytes) -> None:
        # No O_TRUNC and non-blocking until the descriptor is known to be a regular file: a FIFO, socket or
        # device swapped in since the checks above is neither truncated nor waited on. No symlink is followed.
        flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(resolved, flags, 0o644)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # a FIFO with no reader
                raise self._not_regular(path, stat.S_IFIFO) from exc
            raise
        with os.fdopen(fd, "wb") as handle:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise self._not_regular(path, mode)
            os.set_blocking(fd, True)
            os.ftruncate(fd, 0)
            handle.write(data)
        record_write(resolved, data)  # the run's own write: not an outside change (planmode.approval.staleness)


def _split_lines(text: str) -> list[str]:
    """Lines with their endings, split on "\\n" only (as editors and grep number them)."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def _validation_message(exc: ValidationError | Exception) -> str:
    if isinstance(exc, ValidationError):
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())
        return f"Invalid tool arguments: {problems}"
    return f"Invalid tool arguments: {exc}"


def _require_text(name: str, value: str) -> None:
    """Refuse text with a lone surrogate: it cannot be encoded, written to a file, or stored in a checkpoint."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WorkspaceError(
            f"refused: {name} contains a lone surrogate (U+{ord(value[exc.start]):04X} at position {exc.start}), "
            "which is not valid Unicode text; send valid text"
        ) from None


_FENCED = regex.compile(r"\A\s*```[\w+.-]*[ \t]*\r?\n(?P<body>.*?)\r?\n[ \t]*```\s*\Z", regex.DOTALL)
_TAGGED = regex.compile(
    r"\A\s*<(?P<tag>[A-Za-z][\w-]{0,30})>[ \t]*\r?\n(?P<body>.*?)\r?\n?[ \t]*</(?P=tag)>\s*\Z", regex.DOTALL
)


def unwrap_python(path: str, content: str) -> tuple[str, str]:
    """The code of a Python file a model sent wrapped — in a Markdown fence (`````python ... `````) or in one pair
    of tags (``<code> ... </code>``, any one tag name) — and what was removed; ``content`` and "" when
    that does not apply. Only for a ``.py`` path whose content does not compile while the unwrapped code does
    (neither a fence line nor a tag line is ever Python); nothing is run (``compile()`` only)."""
    if not path.endswith(".py") or _compiles(content):
        return content, ""
    for pattern, what in ((_FENCED, "the Markdown fence lines"), (_TAGGED, "the <{tag}> tags")):
        m = pattern.fullmatch(content, timeout=1.0)
        if m is not None and _compiles(m.group("body")):
            removed = what.format(tag=m.groupdict().get("tag"))
            return m.group("body") + "\n", f"{removed} around the code were removed: a Python file holds only code"
    # one line with its line breaks escaped ("def add(a, b):\\n    return a + b"): its lines
    if "\n" not in content and "\\n" in content and _compiles(lines := content.replace("\\n", "\n")):
        return lines + "\n", "the escaped newlines (\\n) were written as line breaks: a Python file holds its lines"
    return content, ""


#: Data files whose lines a model may send escaped (``0\\n100`` for two lines).
_TEXT_SUFFIXES = (".txt", ".csv", ".tsv", ".md", ".log", ".dat", ".ini", ".cfg", ".toml", ".yaml", ".yml")


def unescape_lines(path: str, content: str) -> tuple[str, str]:
    """The lines of a text file a model sent as one line with escaped newlines (``"0\\n100"`` in data.txt is
    the two lines ``0`` and ``100``), and what was changed; ``content`` and "" when that does not apply: another
    kind of file, a content with a real newline, or none written as ``\\n``."""
    if not path.lower().endswith(_TEXT_SUFFIXES) or "\n" in content or "\\n" not in content:
        return content, ""
    lines = content.replace("\\r\\n", "\n").replace("\\n", "\n")
    return lines, "the escaped newlines (\\n) were written as line breaks: a text file holds its lines"


def _compiles(source: str) -> bool:
    try:
        compile(source, "<content>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # too deep to compile: not code
        return False
    return True


def _clean(text: str) -> str:
    """``text`` with any lone surrogate (a file name that is not UTF-8) written as a ``\\udcXX`` escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "a special file"


def _guarded(func: Callable[..., str], root: Path) -> Callable[..., str]:
    """Turn an OS error (permission denied, disk full, ...) or text that cannot be encoded into a
    `WorkspaceError` the tool returns; whatever comes back is clean text."""

    def run(*args: object, **kwargs: object) -> str:
        token = _CALL_PROTECTED.set(_protected_now())
        try:
            return _clean(func(*args, **kwargs))
        except WorkspaceError as exc:
            raise WorkspaceError(_clean(str(exc))) from exc
        except OSError as exc:
            where = exc.filename or kwargs.get("path", ".")
            raise WorkspaceError(
                _clean(f"{func.__name__} failed on {str(where)!r} (workspace {root}): {exc.strerror or exc}")
            ) from exc
        except UnicodeError as exc:
            raise WorkspaceError(f"{func.__name__} refused text that is not valid Unicode: {exc}") from exc
        finally:
            _CALL_PROTECTED.reset(token)

    run.__name__ = func.__name__
    return run


_DESCRIPTIONS = {
    "list_files": "List the entries of a workspace directory (directories end with '/'), optionally "
    "filtered by a glob and recursively (skipping .git, node_modules, .venv, __pycache__). Read-only.",
    "read_file": "Read a UTF-8 text file in the workspace, optionally a line range (1-based, inclusive). "
    "Long output is truncated with a note saying where to continue. Read-only.",
    "search_files": "Search text files under a workspace directory for a regex (or plain text with "
    "literal=true); returns 'path:line: text' for each matching line. Read-only.",
    "write_file": "Create or overwrite a text file in the workspace with the given content; parent "
    "directories are created. Changes the workspace.",
    "edit_file": "Replace old_string with new_string in a workspace file. old_string must occur exactly "
    "once unless replace_all=true. Changes the workspace.",
}
_SCHEMAS: dict[str, type[BaseModel]] = {
    "list_files": ListFilesArgs,
    "read_file": ReadFileArgs,
    "search_files": SearchFilesArgs,
    "write_file": WriteFileArgs,
    "edit_file": EditFileArgs,
}
_READ_ONLY_NAMES = ("list_files", "read_file", "search_files")
_WRITE_NAMES = ("write_file", "edit_file")


def _build(workspace: _Workspace, names: tuple[str, ...]) -> list[BaseTool]:
    return [
        StructuredTool.from_function(
            func=_guarded(getattr(workspace, name), workspace.root),
            name=name,
            description=_DESCRIPTIONS[name],
            args_schema=_SCHEMAS[name],
            handle_tool_error=True,
            handle_validation_error=_validation_message,
            metadata={
                READ_ONLY_METADATA_KEY: name in _READ_ONLY_NAMES,
                IDEMPOTENT_METADATA_KEY: name == "write_file",
                OWN_FILES_METADATA_KEY: workspace.own_files(),
                WORKSPACE_ROOT_METADATA_KEY: str(workspace.root),
            },
        )
        for name in names
    ]


def workspace_tools(
    root: str | Path,
    *,
    limits: WorkspaceLimits | None = None,
    protected: Iterable[str | Path] = (),
    allow_git_writes: bool = False,
) -> list[BaseTool]:
    """All five workspace tools (list_files, read_file, search_files, write_file, edit_file) for ``root``.

    Args:
        root: the workspace directory.
        limits: bounds on what the tools read, return and write.
        protected: files the tools refuse to read, write, list or search, such as the run database (relative
            paths are relative to the current directory, as SQLite opens them); each is protected with its
            ``-wal``, ``-shm`` and ``-journal`` companions and its ``.edit-lock``. Every ``.planmode/`` folder,
            the approval key file and the database of the run a tool is called in are always protected.
        allow_git_writes: let write_file and edit_file write in ``.git`` (refused by default, unless the run
            setting ``allow_git_writes`` of the step calling them allows it).

    Raises `WorkspaceError` at once if ``root`` is not an existing directory.
    """
    workspace = _Workspace(root, limits or WorkspaceLimits(), protected, allow_git_writes=allow_git_writes)
    return _build(workspace, _READ_ONLY_NAMES + _WRITE_NAMES)


def read_only_workspace_tools(
    root: str | Path, *, limits: WorkspaceLimits | None = None, protected: Iterable[str | Path] = ()
) -> list[BaseTool]:
    """The read-only workspace tools (list_files, read_file, search_files) for ``root``; ``protected`` as in
    `workspace_tools`.

    Raises `WorkspaceError` at once if ``root`` is not an existing directory.
    """
    return _build(_Workspace(root, limits or WorkspaceLimits(), protected), _READ_ONLY_NAMES)
