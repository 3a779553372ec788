"""Staleness: a fingerprint of the workspace taken at approval, checked again when a run resumes.

A fingerprint is JSON data kept in state (``workspace_fingerprint``)::

    {"kind": "git", "root": "/abs/workspace", "head": "<commit>" | null, "tree": "<HEAD's tree of the folder>",
     "files": {"<path>": "<sha256 of a dirty or untracked file>" | "deleted"}, "digest": "<hash of it but head>"}
    {"kind": "files", "root": "/abs/workspace", "files": {"<path>": "<sha256>" | "missing"}, "digest": "..."}

In a git repository the tracked files are fingerprinted by the tree of the workspace's folder at ``HEAD``
(git hashes their content; a commit elsewhere in the repository, or one that changes nothing here, is no
change) and the files ``git status`` reports (modified, staged, untracked; not ignored ones) by their own
content hash, so the cost is one ``git status`` plus hashing the dirty files, not hashing the whole tree.
Outside a repository the files the planner's exploration read (``explored_paths``) are hashed. `changed_files`
names what differs between two fingerprints (for a moved ``HEAD``, with ``git diff --name-only``).

The check runs in the dispatch gate (`planmode.nodes._gates`) before new steps start, after a real pause
(`planmode.nodes._batch.staleness_check_due`): in another process than the last check (a crash, ``planmode
resume``), in another invocation of the graph (an answer at any interrupt, a budget or model-unavailable pause
resumed), after a human answered a step question, or in the first super-step of a resumed invocation; never on
a timer. Only changes nobody in the run made are asked about (`outside_changes`): not planmode's database and
``.planmode/`` folder, and not a file whose content is still what the run's workspace tools last wrote there
(``run_writes``). Steps that were running when a process died are
re-run first (they had started); nothing new starts before the question. A changed fingerprint interrupts
with ``planmode.stale``::

    {"type": "planmode.stale", "fingerprint": "<digest now>", "changed": ["path", ...], "markdown": "...",
     "actions": ["approve", "replan", "cancel"], "error": null | "why the previous answer was refused"}

Resume values: ``{"action": "approve", "fingerprint": "<the digest shown>"}`` (go on with the plan as it is),
``{"action": "replan", "feedback": "optional"}`` (the planner revises the plan, told which files changed; it is
then approved again) or ``{"action": "cancel", "feedback": "optional"}``. Anything else is refused with a
message and asked again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import stat
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planmode.state.models import clean_text
from planmode.text import markdown_text
from planmode.tools._writes import path_key

__all__ = [
    "STALE_TYPE",
    "StaleAnswer",
    "changed_files",
    "explored_paths",
    "fingerprint",
    "outside_changes",
    "own_files",
    "parse_stale_resume",
    "same_content",
    "stale_payload",
]

STALE_TYPE = "planmode.stale"
STALE_ACTIONS = ("approve", "replan", "cancel")

#: Seconds a git command may take before the fingerprint falls back to hashing the explored files.
GIT_TIMEOUT = 10.0
#: Files hashed at most (dirty files in a repository, explored files otherwise); the rest count by name only.
MAX_HASHED_FILES = 2000
#: A file up to this size is hashed whole; a larger one by its size, mtime, first and last bytes (`_hash_file`).
MAX_HASHED_BYTES = 1024 * 1024 * 1024
#: Bytes hashed at the start and at the end of a file larger than MAX_HASHED_BYTES.
HEAD_BYTES = 16 * 1024 * 1024
TAIL_BYTES = 1024 * 1024
#: Changed paths shown at most.
MAX_SHOWN = 200


#: Configuration given to every git command (it wins over the repository's own): nothing the workspace's
#: ``.git/config`` says makes git run a program. A step may write that file; planmode must not run what it wrote.
_GIT_SAFE_CONFIG = (
    "core.fsmonitor=",  # no file-system monitor hook (empty: off, as a boolean and as a hook path)
    "core.hooksPath=/dev/null",  # no hooks
    "core.untrackedCache=false",
    "core.attributesFile=/dev/null",  # no user-wide attributes (filters, diff drivers)
    "core.pager=cat",
    "diff.external=",  # no external diff program
    "status.submoduleSummary=false",
)
#: Environment variables git reads that could redirect it or make it run a program; all ``GIT_*`` are dropped.
_GIT_ENV = {
    "GIT_OPTIONAL_LOCKS": "0",  # status must not take the index lock
    "GIT_CONFIG_NOSYSTEM": "1",  # no system-wide config
    "GIT_ATTR_NOSYSTEM": "1",  # no system-wide attributes
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
}


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return {**env, **_GIT_ENV}


def _run_git(root: Path, config: tuple[str, ...], *args: str) -> str | None:
    settings = [item for pair in config for item in ("-c", pair)]
    try:
        out = subprocess.run(
            ["git", "--no-pager", *settings, "-C", str(root), *args],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=GIT_TIMEOUT,
            check=False,
            env=_git_env(),
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.decode("utf-8", "surrogateescape")


def _filter_drivers(root: Path) -> tuple[str, ...]:
    """``-c`` settings that switch off every filter driver the repository's config defines (a ``.gitattributes``
    of the workspace may name one; ``git status`` would run its ``clean`` command on a modified file). Reading
    the config runs nothing."""
    listed = _run_git(root, _GIT_SAFE_CONFIG, "config", "--null", "--name-only", "--get-regexp", r"^filter\.")
    names = set()
    for key in (listed or "").split("\0"):
        if key.startswith("filter.") and key.count(".") >= 2:
            names.add(key[len("filter.") : key.rindex(".")])
    return tuple(
        f"filter.{name}.{part}" + ("=false" if part == "required" else "=")
        for name in sorted(names)
        for part in ("clean", "smudge", "process", "required")
    )


def _git(root: Path, *args: str) -> str | None:
    """Output of ``git -C root args`` or None when git is missing, fails or times out.

    git runs with the repository's power to run programs switched off (`_GIT_SAFE_CONFIG`, `_GIT_ENV`): no
    fsmonitor hook, no hooks, no external diff or pager, no system or user-wide attributes, and every filter
    driver the repository's config names emptied (`_filter_drivers`), so a step that writes ``core.fsmonitor``
    or a filter into ``.git/config`` makes planmode run nothing. Submodules are compared by their commit only
    (``--ignore-submodules=dirty`` in `fingerprint`): git would run a status inside each, with its own config.
    What remains: git itself (the one on ``PATH``), and a config key a future git adds that runs a program.
    """
    return _run_git(root, (*_GIT_SAFE_CONFIG, *_filter_drivers(root)), *args)


def _hash_file(path: Path) -> str | None:
    """The content hash of a regular file, or None when it is not a readable file.

    A file up to `MAX_HASHED_BYTES` is hashed whole (streamed): the first 16 hex digits of its sha256 (the form
    `same_content` compares a recorded write with). A larger one is fingerprinted by its size, its modification
    time (nanoseconds) and the sha256 of its first `HEAD_BYTES` and last `TAIL_BYTES`: a change of length, of
    its ends, or a write that leaves its mtime (almost any write) is seen; a same-size edit in the middle that
    also restores the mtime is not."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # a FIFO or a device is never read (it could block)
            return "not a regular file"
        h = hashlib.sha256()
        if info.st_size <= MAX_HASHED_BYTES:
            while chunk := os.read(fd, 1 << 20):
                h.update(chunk)
            return h.hexdigest()[:16]
        _read_into(h, fd, HEAD_BYTES)
        os.lseek(fd, max(HEAD_BYTES, info.st_size - TAIL_BYTES), os.SEEK_SET)
        _read_into(h, fd, TAIL_BYTES)
        return f"size {info.st_size} mtime {info.st_mtime_ns} ends {h.hexdigest()[:16]}"
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_into(h: Any, fd: int, limit: int) -> None:
    left = limit
    while left > 0:
        chunk = os.read(fd, min(1 << 20, left))
        if not chunk:
            return
        h.update(chunk)
        left -= len(chunk)


def _digest(data: Mapping[str, Any]) -> str:
    blob = json.dumps(data, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _show(path: str) -> str:
    return clean_text(path)


def fingerprint(workspace: str | None, read_paths: Iterable[str] = ()) -> dict[str, Any] | None:
    """The fingerprint of ``workspace`` (None when there is no workspace folder): git HEAD and the dirty files
    in a git repository, else the hashes of ``read_paths`` (relative to the workspace, or absolute inside it)."""
    if not workspace:
        return None
    root = Path(workspace)
    if not root.is_dir():
        return None
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is not None:
        head = _git(root, "rev-parse", "--verify", "-q", "HEAD")
        # the tree of the workspace's folder at HEAD: its tracked content, whatever else a commit touched
        tree = _git(root, "rev-parse", "--verify", "-q", "HEAD:./") if head else None
        status = _git(
            root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=dirty", "--", "."
        )
        if status is not None:
            files: dict[str, str] = {}
            toplevel = Path(top.strip())
            entries = status.split("\0")
            i = 0
            while i < len(entries):
                entry = entries[i]
                i += 1
                if len(entry) < 4:
                    continue
                code, rel = entry[:2], entry[3:]
                if code[0] in "RC":  # a rename or copy: the next entry is the source path
                    i += 1
                if len(files) >= MAX_HASHED_FILES:
                    files[_show(rel)] = "not hashed"
                    continue
                full = toplevel / rel
                files[_show(rel)] = _hash_file(full) or "deleted"
            data = {"kind": "git", "root": clean_text(str(root)), "tree": (tree or "").strip() or None, "files": files}
            # the repository's top folder (the files' keys are relative to it): outside the digest
            top_path = clean_text(os.path.realpath(toplevel))
            return {**data, "head": (head or "").strip() or None, "top": top_path, "digest": _digest(data)}
    hashed: dict[str, str] = {}
    for p in sorted(set(read_paths))[:MAX_HASHED_FILES]:
        path = Path(p) if os.path.isabs(p) else root / p
        hashed[_show(p)] = _hash_file(path) or "missing"
    data = {"kind": "files", "root": clean_text(str(root)), "files": hashed}
    return {**data, "digest": _digest(data)}


def changed_files(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The paths that differ between two fingerprints (sorted; at most MAX_SHOWN, then a count)."""
    return _shown(_changed(old, new))


def _changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> set[str]:
    changed: set[str] = set()
    old_files = old.get("files") if isinstance(old.get("files"), Mapping) else {}
    new_files = new.get("files") if isinstance(new.get("files"), Mapping) else {}
    assert isinstance(old_files, Mapping) and isinstance(new_files, Mapping)
    for path in set(old_files) | set(new_files):
        if old_files.get(path) != new_files.get(path):
            changed.add(str(path))
    if old.get("kind") == "git" and new.get("kind") == "git" and old.get("tree") != new.get("tree"):
        diff = None
        if old.get("head") and new.get("head"):
            root = Path(str(new.get("root")))
            diff = _git(
                root,
                "diff",
                "--no-ext-diff",
                "--no-textconv",
                "--name-only",
                "-z",
                str(old["head"]),
                str(new["head"]),
                "--",
                ".",
            )
        if diff is None:
            changed.add(f"(HEAD moved from {old.get('head')} to {new.get('head')})")
        else:
            changed.update(_show(p) for p in diff.split("\0") if p)
    if old.get("kind") != new.get("kind") or old.get("root") != new.get("root"):
        changed.add(f"(the workspace itself changed: {old.get('root')} -> {new.get('root')})")
    return changed


def _shown(changed: Iterable[str]) -> list[str]:
    shown = sorted(changed)
    if len(shown) > MAX_SHOWN:
        shown = [*shown[:MAX_SHOWN], f"... and {len(shown) - MAX_SHOWN} more"]
    return shown


def same_content(fingerprinted: Any, sha256: str) -> bool:
    """Whether a file's fingerprint hash (`_hash_file`) is the hash of content whose full sha256 is ``sha256``."""
    return isinstance(fingerprinted, str) and len(fingerprinted) == 16 and sha256[:16] == fingerprinted


def _absolute(fp: Mapping[str, Any], key: str) -> str | None:
    """The real path of a fingerprint's file key (None for a note such as a moved HEAD, or an old fingerprint)."""
    if key.startswith("("):
        return None
    base = fp.get("top") if fp.get("kind") == "git" else fp.get("root")
    if not isinstance(base, str) or not base:
        return None
    return path_key(Path(base) / key)


def _is_own(path: str, own: Iterable[str]) -> bool:
    return any(path == o or path.startswith(o.rstrip(os.sep) + os.sep) for o in own)


def outside_changes(
    old: Mapping[str, Any], new: Mapping[str, Any], run_writes: Mapping[str, str], own: Iterable[str] = ()
) -> list[str]:
    """The changes between two fingerprints that nobody in the run made (sorted; at most MAX_SHOWN).

    Left out: planmode's own files (``own``: its database and companions, its ``.planmode/`` folder, as real
    paths; ``<workspace>/.planmode/`` always), and every file the run itself wrote (``run_writes``: real path ->
    sha256 of the bytes last written, `planmode.tools._writes`) whose content now is still that write. A file the run
    wrote and someone changed or deleted since is an outside change. Hashes at most the files the run wrote that
    a git fingerprint does not list (a write equal to ``HEAD``'s content)."""
    root = new.get("root")
    mine = [*own, path_key(Path(str(root)) / ".planmode")] if isinstance(root, str) and root else list(own)
    files = new.get("files") if isinstance(new.get("files"), Mapping) else {}
    assert isinstance(files, Mapping)
    out: set[str] = set()
    for key in _changed(old, new):
        path = _absolute(new, key)
        if path is None:
            out.add(key)
            continue
        if _is_own(path, mine):
            continue
        written = run_writes.get(path)
        if isinstance(written, str):
            current = files.get(key) if key in files else _hash_file(Path(path))
            if same_content(current, written):
                continue
        out.add(key)
    return _shown(out)


def own_files(tools: Iterable[Any], checkpointer: Any = None) -> list[str]:
    """planmode's own files: the ones the workspace tools name (their ``planmode_own_files`` metadata), and a
    SQLite checkpointer's database with its ``-wal``, ``-shm`` and ``-journal`` files."""
    out: set[str] = set()
    conn = getattr(checkpointer, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        try:
            with getattr(checkpointer, "lock", None) or contextlib.nullcontext():
                rows = conn.execute("PRAGMA database_list").fetchall()
        except (sqlite3.Error, TypeError, ValueError):
            rows = []
        for row in rows:
            if len(row) >= 3 and isinstance(row[2], str) and row[2]:
                out.update(path_key(row[2] + suffix) for suffix in ("", "-wal", "-shm", "-journal"))
    for tool in tools:
        metadata = getattr(tool, "metadata", None)
        listed = metadata.get("planmode_own_files") if isinstance(metadata, Mapping) else None
        if isinstance(listed, (list, tuple)):
            out.update(path_key(p) for p in listed if isinstance(p, str))
    return sorted(out)


def stale_payload(current: Mapping[str, Any], changed: list[str], *, error: str | None) -> dict[str, Any]:
    """The JSON payload of the ``planmode.stale`` interrupt."""
    lines = [
        "## The workspace changed since the plan was approved",
        "",
        *("- " + markdown_text(p.replace("\n", "\\n").replace("\r", "\\r")) for p in changed),
        "",
        "approve: go on with the plan as it is · replan: revise the plan with this change · cancel: stop the run",
    ]
    return {
        "type": STALE_TYPE,
        "fingerprint": current.get("digest"),
        "changed": changed,
        "markdown": "\n".join(lines),
        "actions": list(STALE_ACTIONS),
        "error": clean_text(error) if error else None,
    }


@dataclass(frozen=True)
class StaleAnswer:
    action: str  # approve, replan or cancel
    feedback: str = ""


def read_answer(value: Any, actions: tuple[str, ...], example: dict[str, str]) -> tuple[dict[str, Any], str] | str:
    """A gate's resume value as a dict with a known ``action`` and a string (or no) ``feedback``, and that
    action; or why it is refused (never raises). A JSON string is read as its object."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return f"unreadable answer {clean_text(value[:80])!r}: resume with {json.dumps(example)}"
    if not isinstance(value, dict):
        return f"the answer must be a JSON object with an 'action', got {type(value).__name__}"
    action = value.get("action")
    if action not in actions:
        return f"unknown action {clean_text(str(action))[:40]!r}; use one of {', '.join(actions)}"
    feedback = value.get("feedback")
    if feedback is not None and not isinstance(feedback, str):
        return "'feedback' must be a string"
    return value, str(action)


def parse_stale_resume(value: Any, digest: str) -> StaleAnswer | str:
    """The decision in a resume value at the staleness interrupt, or why it is refused (never raises)."""
    read = read_answer(value, STALE_ACTIONS, {"action": "approve", "fingerprint": digest})
    if isinstance(read, str):
        return read
    value, action = read
    feedback = value.get("feedback")
    if action == "approve":
        shown = value.get("fingerprint")
        if not isinstance(shown, str) or not shown:
            return f'approve must name the fingerprint shown: {{"action": "approve", "fingerprint": "{digest}"}}'
        if shown != digest:
            return f"stale fingerprint {clean_text(shown)[:40]!r}: the workspace changed again; it is now {digest!r}"
    return StaleAnswer(action=action, feedback=clean_text((feedback or "").strip()))


def explored_paths(messages: Iterable[Any], limit: int = MAX_HASHED_FILES) -> list[str]:
    """The ``path`` arguments of the tool calls in an exploration transcript (read-only tools: the gate
    refuses the others before approval), in order, without repeats."""
    out: list[str] = []
    for m in messages:
        for call in getattr(m, "tool_calls", None) or ():
            args = call.get("args") if isinstance(call, Mapping) else None
            path = args.get("path") if isinstance(args, Mapping) else None
            if isinstance(path, str) and path and clean_text(path) not in out:
                out.append(clean_text(path))
    return out[:limit]
