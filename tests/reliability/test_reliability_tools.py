"""Reliability: tool abuse. Hostile arguments given to the workspace tools, as a model (or the planner
before approval) may give them: lone surrogates in every text argument, catastrophic regular expressions,
FIFOs, and the run's own database (with its -wal, -shm, -journal and .edit-lock companions, and the
``.planmode/`` folder).

Every trial, through a tool call as LangGraph's ToolNode makes it: the answer comes back as the tool's result
(never an exception), within a bound (10 s; no FIFO blocks, no regex backtracks for long), as text that can
be encoded (so the checkpoint that stores it can be written), and nothing in the workspace changes — the
database above all. The unit tests of each defence are in ``tests/graph/tools/test_tools_workspace.py`` and
``tests/cli/test_cli_protected.py``; this file is the trial count the reliability table quotes.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from planmode.persistence import sqlite_checkpointer
from planmode.persistence.edit import edit_lock
from planmode.tools import workspace_tools
from planmode.tools.workspace import WorkspaceLimits

pytestmark = pytest.mark.integration

_SURROGATES = ["\ud83d", "\udfff", "\udc80", "a\ud800b"]
_REGEXES = [r"(a+)+$", r"(a|a)*b", r"(a|aa)+$", r"^(a|a?)+$", r"(\w+\s?)*$", r"(.*a){12}", r"((a*)*)*b"]
_PROTECTED = [
    "runs.sqlite",
    "runs.sqlite-wal",
    "runs.sqlite-shm",
    "runs.sqlite-journal",
    "runs.sqlite.edit-lock",
    ".planmode/planmode.sqlite",
    ".planmode/notes.txt",
]


def _trials() -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, tool, arguments) of every trial."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    for s in _SURROGATES:
        out += [
            ("surrogate", "read_file", {"path": f"README{s}.md"}),
            ("surrogate", "list_files", {"path": f"src{s}"}),
            ("surrogate", "search_files", {"pattern": f"hello{s}"}),
            ("surrogate", "search_files", {"pattern": "x", "path": s}),
            ("surrogate", "write_file", {"path": f"new{s}.txt", "content": "x"}),
            ("surrogate", "write_file", {"path": "new.txt", "content": f"smile {s}"}),
            ("surrogate", "edit_file", {"path": "README.md", "old_string": "hello", "new_string": s}),
            ("surrogate", "edit_file", {"path": "README.md", "old_string": f"hel{s}lo", "new_string": "x"}),
        ]
    for pattern in _REGEXES:
        out += [
            ("regex", "search_files", {"pattern": pattern}),
            ("regex", "search_files", {"pattern": pattern, "path": "evil.txt"}),
        ]
    for fifo in ("pipe", "pipe-link", "src/pipe"):
        out += [
            ("fifo", "read_file", {"path": fifo}),
            ("fifo", "write_file", {"path": fifo, "content": "x"}),
            ("fifo", "edit_file", {"path": fifo, "old_string": "a", "new_string": "b"}),
        ]
    out.append(("fifo", "search_files", {"pattern": "hello"}))
    for path in _PROTECTED:
        out += [
            ("protected", "read_file", {"path": path}),
            ("protected", "write_file", {"path": path, "content": "gone"}),
            ("protected", "edit_file", {"path": path, "old_string": "S", "new_string": "x"}),
        ]
    out += [("protected", "list_files", {"path": ".planmode"}), ("protected", "search_files", {"pattern": "SQLite"})]
    return out


TRIALS = _trials()


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("# Title\nhello world\n")
    (root / "evil.txt").write_text("a" * 28 + "!\n")  # what catastrophic regexes backtrack on
    (root / ".planmode").mkdir()
    (root / ".planmode" / "notes.txt").write_text("planmode's own\n")
    for fifo in (root / "pipe", root / "src" / "pipe"):
        os.mkfifo(fifo)
    (root / "pipe-link").symlink_to(root / "pipe")
    saver = sqlite_checkpointer(root / ".planmode" / "planmode.sqlite")
    saver.conn.close()
    saver = sqlite_checkpointer(root / "runs.sqlite")  # a database given with --db, inside the workspace
    try:
        with edit_lock(saver, "t"):
            saver.conn.execute("PRAGMA wal_checkpoint")
    finally:
        saver.conn.close()
    for companion in ("runs.sqlite-wal", "runs.sqlite-shm", "runs.sqlite-journal"):
        path = root / companion
        if not path.exists():
            path.write_bytes(b"SQLite companion")
    yield root


def _files(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root`` with its bytes (FIFOs and links left out)."""
    out: dict[str, bytes] = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_size < 10_000_000:
            out[str(path.relative_to(root))] = path.read_bytes()
    return out


def _unblock(root: Path) -> None:
    for fifo in (root / "pipe", root / "src" / "pipe"):
        for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, flags))


@pytest.mark.parametrize(("kind", "tool", "args"), TRIALS, ids=[f"{k}-{t}-{i}" for i, (k, t, _) in enumerate(TRIALS)])
def test_hostile_tool_input_comes_back_as_a_bounded_result_and_destroys_nothing(
    ws: Path, kind: str, tool: str, args: dict[str, Any]
) -> None:
    tools = {
        t.name: t
        for t in workspace_tools(ws, limits=WorkspaceLimits(search_seconds=0.5), protected=[ws / "runs.sqlite"])
    }
    before = _files(ws)
    box: list[Any] = []
    call = {"type": "tool_call", "id": "abuse", "name": tool, "args": args}
    worker = threading.Thread(target=lambda: box.append(tools[tool].invoke(call)), daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(10)
    if worker.is_alive():
        _unblock(ws)
        pytest.fail(f"{tool} blocked for 10 s on {args!r}")
    elapsed = time.monotonic() - started
    (message,) = box
    assert isinstance(message, ToolMessage)
    text = str(message.content)
    text.encode("utf-8")  # a checkpoint that stores it can be written
    assert elapsed < 5, f"{tool} took {elapsed:.1f} s"
    if kind == "surrogate":
        assert message.status == "error" and "lone surrogate" in text, text
    elif kind == "fifo" and tool != "search_files":
        assert "is a FIFO, not a regular file" in text, text
    elif kind == "protected" and tool in ("read_file", "write_file", "edit_file"):
        assert text.startswith("refused") and "planmode's own data" in text, text
    elif kind == "protected":
        assert "SQLite format" not in text and "planmode's own\n" not in text, text
    after = _files(ws)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert not changed, f"{tool} changed {sorted(changed)}"
