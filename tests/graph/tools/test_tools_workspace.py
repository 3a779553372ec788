"""Workspace tools: happy paths, confinement (.., absolute paths, symlinks), bounds, errors as results."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from planmode.errors import PlanModeError
from planmode.tools import (
    WorkspaceError,
    WorkspaceLimits,
    is_read_only,
    read_only,
    read_only_workspace_tools,
    workspace_tools,
)

ALL_NAMES = ["list_files", "read_file", "search_files", "write_file", "edit_file"]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "README.md").write_text("# Title\nhello world\n")
    (root / "src" / "pkg" / "mod.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    (root / "src" / "notes.txt").write_text("nothing here\n")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret_dir = tmp_path / "outside"
    secret_dir.mkdir()
    (secret_dir / "secret.txt").write_text("TOP SECRET\n")
    return secret_dir


def tools_for(root: Path, limits: WorkspaceLimits | None = None) -> dict[str, BaseTool]:
    return {t.name: t for t in workspace_tools(root, limits=limits)}


def call(root: Path, name: str, limits: WorkspaceLimits | None = None, **args: object) -> str:
    result = tools_for(root, limits)[name].invoke(args)
    assert isinstance(result, str)
    return result


def test_a_file_named_under_a_workspace_folder_that_is_not_there_is_the_workspaces_file(ws: Path) -> None:
    """The 1.5B edited 'workspace/calc.py' fourteen times, each "no such file", for the workspace's calc.py. A
    read or an edit of a path under a folder called "workspace" (or the root's own name) that the workspace does
    not have is of the file it names inside; a write goes where it says."""
    assert "# Title" in call(ws, "read_file", path="workspace/README.md")
    assert "# Title" in call(ws, "read_file", path=f"{ws.name}/README.md")
    assert "Replaced 1" in call(ws, "edit_file", path="workspace/src/notes.txt", old_string="nothing", new_string="all")
    assert (ws / "src" / "notes.txt").read_text() == "all here\n"
    assert "no such file" in call(ws, "read_file", path="workspace/missing.txt")
    assert "no such file" in call(ws, "read_file", path="other/README.md")  # another folder name: not guessed
    (ws / "workspace").mkdir()  # the folder is there: the path is what it says
    assert "no such file" in call(ws, "read_file", path="workspace/README.md")
    assert "outside the workspace" in call(ws, "read_file", path="workspace/../../outside/secret.txt")


# -- factories and read-only marking ------------------------------------------------------------------


def test_factories_build_the_named_tools(ws: Path) -> None:
    assert [t.name for t in workspace_tools(ws)] == ALL_NAMES
    assert [t.name for t in read_only_workspace_tools(str(ws))] == ALL_NAMES[:3]
    assert all(t.handle_tool_error is True for t in workspace_tools(ws))


def test_is_read_only_on_each_tool(ws: Path) -> None:
    marks = {t.name: is_read_only(t) for t in workspace_tools(ws)}
    assert marks == {
        "list_files": True,
        "read_file": True,
        "search_files": True,
        "write_file": False,
        "edit_file": False,
    }
    assert all((t.metadata or {})["planmode_read_only"] == is_read_only(t) for t in workspace_tools(ws))
    assert all(is_read_only(t) for t in read_only_workspace_tools(ws))


def _echo(text: str) -> str:
    return text


def test_unmarked_tool_is_not_read_only_and_read_only_marks_it() -> None:
    tool = StructuredTool.from_function(_echo, name="echo", description="echo", metadata={"owner": "me"})
    assert is_read_only(tool) is False
    assert is_read_only(StructuredTool.from_function(_echo, name="e2", description="e")) is False
    assert read_only(tool) is tool
    assert is_read_only(tool) is True
    assert tool.metadata == {"owner": "me", "planmode_read_only": True}


def test_only_true_counts_as_read_only() -> None:
    tool = StructuredTool.from_function(_echo, name="echo", description="echo", metadata={"planmode_read_only": "yes"})
    assert is_read_only(tool) is False


def test_missing_root_is_a_setup_error(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="not an existing directory"):
        workspace_tools(tmp_path / "nope")
    assert issubclass(WorkspaceError, PlanModeError)


# -- happy paths --------------------------------------------------------------------------------------


def test_list_files_top_level(ws: Path) -> None:
    assert call(ws, "list_files").splitlines() == ["README.md", "src/"]


def test_list_files_recursive_with_pattern(ws: Path) -> None:
    out = call(ws, "list_files", path="src", recursive=True)
    assert out.splitlines() == ["src/notes.txt", "src/pkg/", "src/pkg/mod.py"]
    assert call(ws, "list_files", recursive=True, pattern="*.py") == "src/pkg/mod.py"
    assert "No entries" in call(ws, "list_files", pattern="*.rs")


def test_a_pattern_that_matches_nothing_is_told_what_the_folder_holds(ws: Path) -> None:
    """The 0.5B listed with ".*" and "*/" (a regex, a folder) four times beside the file it had written, each
    answered "No entries": the answer says the pattern is a glob and what the folder holds."""
    assert call(ws, "list_files", pattern=".*") == (
        "No entries in '.' matching '.*' (the pattern is a glob such as '*.py'; '.' holds: README.md, src/)"
    )
    assert call(ws, "list_files", path="src/pkg", pattern="*.rs").endswith("'src/pkg' holds: src/pkg/mod.py)")
    (ws / "empty").mkdir()
    assert call(ws, "list_files", path="empty", pattern="*") == "No entries in 'empty' matching '*'"


def test_list_files_recursive_skips_git(ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("ref\n")
    out = call(ws, "list_files", recursive=True)
    assert ".git/" in out.splitlines()
    assert ".git/HEAD" not in out


def test_read_file_whole_and_range(ws: Path) -> None:
    assert call(ws, "read_file", path="README.md") == "# Title\nhello world\n"
    assert call(ws, "read_file", path="src/pkg/mod.py", start_line=5, end_line=6) == "def g():\n    return 2\n"
    assert call(ws, "read_file", path="src/pkg/mod.py", start_line=6) == "    return 2\n"


def test_read_file_range_errors(ws: Path) -> None:
    assert "past the end" in call(ws, "read_file", path="README.md", start_line=10)
    assert "before start_line" in call(ws, "read_file", path="README.md", start_line=2, end_line=1)
    assert "Invalid tool arguments" in call(ws, "read_file", path="README.md", start_line=0)


def test_read_file_accepts_plain_string_input(ws: Path) -> None:
    assert tools_for(ws)["read_file"].invoke("README.md") == "# Title\nhello world\n"


def test_search_files_regex_and_literal(ws: Path) -> None:
    out = call(ws, "search_files", pattern=r"def \w+\(")
    assert out.splitlines() == ["src/pkg/mod.py:1: def f():", "src/pkg/mod.py:5: def g():"]
    assert call(ws, "search_files", pattern="f(", literal=True) == "src/pkg/mod.py:1: def f():"
    assert call(ws, "search_files", pattern="HELLO", ignore_case=True) == "README.md:2: hello world"
    assert call(ws, "search_files", pattern="o", glob="*.txt", path="src") == "src/notes.txt:1: nothing here"
    assert "No matches" in call(ws, "search_files", pattern="zebra")


def test_search_files_bad_regex_is_a_result(ws: Path) -> None:
    assert "invalid regex" in call(ws, "search_files", pattern="f(")


def test_search_files_skips_binary(ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"hello\x00world")
    assert call(ws, "search_files", pattern="hello") == "README.md:2: hello world"


def test_write_file_creates_parents_and_overwrites(ws: Path) -> None:
    out = call(ws, "write_file", path="new/deep/file.txt", content="abc\n")
    assert out == "Created new/deep/file.txt (4 bytes)"
    assert (ws / "new" / "deep" / "file.txt").read_text() == "abc\n"
    assert call(ws, "write_file", path="README.md", content="x").startswith("Overwrote README.md")
    assert (ws / "README.md").read_text() == "x"


def test_edit_file_replaces_one_occurrence(ws: Path) -> None:
    out = call(ws, "edit_file", path="src/pkg/mod.py", old_string="return 1", new_string="return 10")
    assert out == "Replaced 1 occurrence in src/pkg/mod.py"
    assert "return 10\n" in (ws / "src" / "pkg" / "mod.py").read_text()


def test_edit_file_replace_all(ws: Path) -> None:
    out = call(ws, "edit_file", path="src/pkg/mod.py", old_string="return", new_string="yield", replace_all=True)
    assert out == "Replaced 2 occurrences in src/pkg/mod.py"
    assert "return" not in (ws / "src" / "pkg" / "mod.py").read_text()


def test_edit_file_preserves_crlf(ws: Path) -> None:
    (ws / "win.txt").write_bytes(b"a\r\nb\r\n")
    call(ws, "edit_file", path="win.txt", old_string="b", new_string="c")
    assert (ws / "win.txt").read_bytes() == b"a\r\nc\r\n"


# -- edit_file errors ---------------------------------------------------------------------------------


def test_edit_file_zero_matches(ws: Path) -> None:
    before = (ws / "README.md").read_text()
    out = call(ws, "edit_file", path="README.md", old_string="absent", new_string="x")
    assert "not found in 'README.md'" in out
    assert (ws / "README.md").read_text() == before


def test_an_edit_that_needs_the_files_text_is_shown_it(ws: Path) -> None:
    """The 1.5B, fixing a square() that returned x * 3 without reading geometry.py, sent "return x * x" as both
    strings twice: the error shows the file as it is, to copy old_string from (a long file clipped)."""
    (ws / "geometry.py").write_text("def square(x):\n    return x * 3\n")
    same = call(ws, "edit_file", path="geometry.py", old_string="return x * x", new_string="return x * x")
    assert "identical" in same and same.endswith("geometry.py now reads:\ndef square(x):\n    return x * 3\n")
    absent = call(ws, "edit_file", path="geometry.py", old_string="return x + 3", new_string="return x * x")
    assert "not found in 'geometry.py'" in absent and "    return x * 3" in absent
    (ws / "long.py").write_text("x = 1\n" * 1000)
    out = call(ws, "edit_file", path="long.py", old_string="y = 2", new_string="y = 3")
    assert "[the rest not shown: read_file reads it]" in out and len(out) < 1700


def test_edit_file_multiple_matches_without_replace_all(ws: Path) -> None:
    before = (ws / "src" / "pkg" / "mod.py").read_text()
    out = call(ws, "edit_file", path="src/pkg/mod.py", old_string="return", new_string="yield")
    assert "occurs 2 times" in out and "replace_all" in out
    assert (ws / "src" / "pkg" / "mod.py").read_text() == before


def test_edit_file_missing_file_and_empty_old_string(ws: Path) -> None:
    assert "no such file: 'gone.txt'" in call(ws, "edit_file", path="gone.txt", old_string="a", new_string="b")
    assert "old_string is empty" in call(ws, "edit_file", path="README.md", old_string="", new_string="b")


# -- confinement --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("read_file", {"path": "../outside/secret.txt"}),
        ("read_file", {"path": "src/../../outside/secret.txt"}),
        ("list_files", {"path": ".."}),
        ("search_files", {"pattern": "SECRET", "path": "../outside"}),
        ("write_file", {"path": "../outside/new.txt", "content": "x"}),
        ("edit_file", {"path": "../outside/secret.txt", "old_string": "TOP", "new_string": "NO"}),
    ],
)
def test_dotdot_traversal_is_refused(ws: Path, outside: Path, name: str, args: dict[str, object]) -> None:
    out = tools_for(ws)[name].invoke(args)
    assert out.startswith("refused")
    assert "outside the workspace" in out and str(ws) in out and repr(args["path"]) in out
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert not (outside / "new.txt").exists()


def test_dotdot_that_stays_inside_is_allowed(ws: Path) -> None:
    assert call(ws, "read_file", path="src/pkg/../../README.md") == "# Title\nhello world\n"


def test_absolute_paths(ws: Path, outside: Path) -> None:
    out = call(ws, "read_file", path=str(outside / "secret.txt"))
    assert out.startswith("refused") and str(ws) in out
    out = call(ws, "write_file", path="/etc/planmode-test.txt", content="x")
    assert out.startswith("refused")
    assert call(ws, "read_file", path=str(ws / "README.md")) == "# Title\nhello world\n"


def test_symlinked_file_to_outside_is_refused(ws: Path, outside: Path) -> None:
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    for name, args in [
        ("read_file", {"path": "link.txt"}),
        ("write_file", {"path": "link.txt", "content": "pwned"}),
        ("edit_file", {"path": "link.txt", "old_string": "TOP", "new_string": "NO"}),
    ]:
        out = tools_for(ws)[name].invoke(args)
        assert out.startswith("refused 'link.txt'") and str(ws) in out, (name, out)
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert call(ws, "search_files", pattern="SECRET").startswith("No matches")
    assert "link.txt (symlink outside the workspace" in call(ws, "list_files")


def test_symlinked_directory_to_outside_is_refused(ws: Path, outside: Path) -> None:
    (ws / "src" / "escape").symlink_to(outside, target_is_directory=True)
    assert call(ws, "read_file", path="src/escape/secret.txt").startswith("refused")
    assert call(ws, "list_files", path="src/escape").startswith("refused")
    assert call(ws, "search_files", pattern="SECRET", path="src/escape").startswith("refused")
    out = call(ws, "write_file", path="src/escape/sub/new.txt", content="x")
    assert out.startswith("refused")
    assert not (outside / "sub").exists()
    assert call(ws, "search_files", pattern="SECRET").startswith("No matches")
    listing = call(ws, "list_files", recursive=True)
    assert "src/escape (symlink outside the workspace" in listing
    assert "secret.txt" not in listing


def test_dangling_symlink_to_outside_cannot_be_written_through(ws: Path, outside: Path) -> None:
    (ws / "dangling").symlink_to(outside / "not-yet.txt")
    assert call(ws, "write_file", path="dangling", content="x").startswith("refused")
    assert not (outside / "not-yet.txt").exists()


def test_symlink_inside_to_inside_is_allowed(ws: Path) -> None:
    (ws / "readme-link").symlink_to(ws / "README.md")
    (ws / "pkg-link").symlink_to(ws / "src" / "pkg", target_is_directory=True)
    assert call(ws, "read_file", path="readme-link") == "# Title\nhello world\n"
    assert call(ws, "read_file", path="pkg-link/mod.py").startswith("def f():")
    assert call(ws, "list_files", path="pkg-link") == "src/pkg/mod.py"
    call(ws, "edit_file", path="readme-link", old_string="hello", new_string="bye")
    assert (ws / "README.md").read_text() == "# Title\nbye world\n"
    assert (ws / "readme-link").is_symlink()


def test_symlink_loop_is_a_result_not_a_crash(ws: Path) -> None:
    (ws / "a").symlink_to(ws / "b")
    (ws / "b").symlink_to(ws / "a")
    out = call(ws, "read_file", path="a")
    assert "'a'" in out and str(ws) in out


def test_root_given_through_a_symlink(tmp_path: Path, ws: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(ws, target_is_directory=True)
    assert call(alias, "read_file", path="README.md") == "# Title\nhello world\n"
    assert call(alias, "read_file", path=str(alias / "README.md")) == "# Title\nhello world\n"


# -- bounds and refusals ------------------------------------------------------------------------------


def test_list_files_is_bounded(ws: Path) -> None:
    for i in range(10):
        (ws / f"f{i:02}.txt").write_text("x")
    out = call(ws, "list_files", limits=WorkspaceLimits(max_entries=4), pattern="*.txt")
    lines = out.splitlines()
    assert lines[:4] == ["f00.txt", "f01.txt", "f02.txt", "f03.txt"]
    assert len(lines) == 5 and lines[4].startswith("[truncated: showing the first 4 entries")


def test_read_file_is_bounded_with_a_note(ws: Path) -> None:
    (ws / "big.txt").write_text("".join(f"line {i:03}\n" for i in range(1, 101)))  # 9 chars a line
    out = call(ws, "read_file", path="big.txt", limits=WorkspaceLimits(max_read_chars=30))
    body, note = out.rsplit("\n[", 1)
    assert body == "line 001\nline 002\nline 003\n"
    assert "truncated at 30 characters" in note and "lines 1-3 of 100" in note and "start_line=4" in note
    follow = call(ws, "read_file", path="big.txt", start_line=4, limits=WorkspaceLimits(max_read_chars=30))
    assert follow.startswith("line 004\n")


def test_read_file_one_huge_line(ws: Path) -> None:
    (ws / "min.js").write_text("x" * 1000)
    out = call(ws, "read_file", path="min.js", limits=WorkspaceLimits(max_read_chars=50))
    assert out.startswith("x" * 50 + "\n[truncated")


def test_search_files_is_bounded(ws: Path) -> None:
    (ws / "many.txt").write_text("hit\n" * 50)
    out = call(ws, "search_files", pattern="hit", limits=WorkspaceLimits(max_matches=5))
    lines = out.splitlines()
    assert lines[:5] == [f"many.txt:{i}: hit" for i in range(1, 6)]
    assert len(lines) == 6 and lines[5].startswith("[truncated: stopped at 5 matches")


def test_search_files_cuts_long_lines(ws: Path) -> None:
    (ws / "long.txt").write_text("needle" + "y" * 500 + "\n")
    out = call(ws, "search_files", pattern="needle", limits=WorkspaceLimits(max_match_chars=20))
    assert out == "long.txt:1: needle" + "y" * 14


def test_write_over_size_bound_is_refused(ws: Path) -> None:
    limits = WorkspaceLimits(max_write_bytes=10)
    out = call(ws, "write_file", path="big.txt", content="x" * 11, limits=limits)
    assert "refused to write 'big.txt'" in out and "over the limit of 10" in out
    assert not (ws / "big.txt").exists()
    out = call(ws, "edit_file", path="README.md", old_string="hello", new_string="h" * 50, limits=limits)
    assert "over the limit" in out
    assert (ws / "README.md").read_text() == "# Title\nhello world\n"


def test_reading_binary_and_non_utf8_is_refused(ws: Path) -> None:
    (ws / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (ws / "latin1.txt").write_bytes("café".encode("latin-1"))
    assert "'img.png' is a binary file" in call(ws, "read_file", path="img.png")
    assert "not UTF-8 text" in call(ws, "read_file", path="latin1.txt")
    assert "binary" in call(ws, "edit_file", path="img.png", old_string="PNG", new_string="GIF")


def test_reading_too_large_file_is_refused(ws: Path) -> None:
    out = call(ws, "read_file", path="README.md", limits=WorkspaceLimits(max_file_bytes=5))
    assert "too large" in out


# -- errors are tool results --------------------------------------------------------------------------


def test_errors_come_back_as_results_not_exceptions(ws: Path) -> None:
    tools = tools_for(ws)
    assert "no such file: 'missing.txt'" in tools["read_file"].invoke({"path": "missing.txt"})
    assert "is a directory" in tools["read_file"].invoke({"path": "src"})
    assert "is a directory" in tools["write_file"].invoke({"path": "src", "content": "x"})
    assert "is not a directory" in tools["list_files"].invoke({"path": "README.md"})
    assert "Invalid tool arguments" in tools["write_file"].invoke({"path": "a.txt"})


def test_error_tool_call_gives_error_tool_message(ws: Path) -> None:
    call_ = {"type": "tool_call", "id": "c1", "name": "read_file", "args": {"path": "../x"}}
    message = tools_for(ws)["read_file"].invoke(call_)
    assert isinstance(message, ToolMessage)
    assert message.status == "error" and message.tool_call_id == "c1"
    assert str(message.content).startswith("refused '../x'")


async def _ainvoke(tool: BaseTool, args: dict[str, object]) -> object:
    return await tool.ainvoke(args)


def test_async_invoke_returns_error_text(ws: Path) -> None:
    out = asyncio.run(_ainvoke(tools_for(ws)["read_file"], {"path": "/etc/passwd"}))
    assert isinstance(out, str) and out.startswith("refused")


def test_os_errors_become_results(ws: Path) -> None:
    (ws / "blocker").write_text("a file, not a directory")
    out = call(ws, "write_file", path="blocker/child.txt", content="x")
    assert "write_file failed" in out and str(ws) in out


# -- hostile input: surrogates, catastrophic regexes, special files (issue 10, item 11) ----------------------


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@pytest.mark.parametrize(
    ("name", "args", "field"),
    [
        ("read_file", {"path": "bad\ud83d.txt"}, "path"),
        ("list_files", {"path": "src\udfff"}, "path"),
        ("search_files", {"pattern": "x", "path": "\ud800"}, "path"),
        ("search_files", {"pattern": "hello\ud83d"}, "pattern"),
        ("write_file", {"path": "new\ud83d.txt", "content": "x"}, "path"),
        ("write_file", {"path": "new.txt", "content": "smile \ud83d please"}, "content"),
        ("edit_file", {"path": "README.md", "old_string": "hello", "new_string": "bye \udc80"}, "new_string"),
        ("edit_file", {"path": "README.md", "old_string": "hel\ud83dlo", "new_string": "bye"}, "old_string"),
    ],
)
def test_a_lone_surrogate_is_refused_as_a_result(ws: Path, name: str, args: dict[str, object], field: str) -> None:
    before = (ws / "README.md").read_text()
    call_ = {"type": "tool_call", "id": "s1", "name": name, "args": args}
    message = tools_for(ws)[name].invoke(call_)
    assert isinstance(message, ToolMessage) and message.status == "error"
    content = str(message.content)
    assert _encodable(content)
    assert "lone surrogate" in content and f"{field} contains" in content
    assert (ws / "README.md").read_text() == before
    assert not (ws / "new.txt").exists()


def test_a_file_name_that_is_not_utf8_comes_back_as_clean_text(ws: Path) -> None:
    os.close(os.open(os.fsencode(ws) + b"/caf\xe9.txt", os.O_WRONLY | os.O_CREAT, 0o644))
    with open(os.fsencode(ws) + b"/na\xefve.md", "wb") as handle:
        handle.write(b"needle\n")
    listing = call(ws, "list_files")
    assert _encodable(listing) and "caf\\udce9.txt" in listing
    found = call(ws, "search_files", pattern="needle")
    assert _encodable(found) and found == "na\\udcefve.md:1: needle"


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(a|a)*b", r"(a|aa)+$", r"^(a|a?)+$", r"(\w+\s?)*$"])
def test_a_catastrophic_regex_is_bounded_in_time(ws: Path, pattern: str) -> None:
    (ws / "evil.txt").write_text("a" * 28 + "!")  # 29 bytes
    limits = WorkspaceLimits(search_seconds=0.3)
    started = time.monotonic()
    out = call(ws, "search_files", pattern=pattern, path="evil.txt", limits=limits)
    elapsed = time.monotonic() - started
    assert elapsed < 5, f"{pattern!r} took {elapsed:.1f} s"
    assert out.startswith(("No matches", "[stopped", "evil.txt:1:")), out


def test_a_search_that_runs_out_of_time_says_so(ws: Path) -> None:
    (ws / "evil.txt").write_text("a" * 40 + "!\n")
    started = time.monotonic()
    out = call(ws, "search_files", pattern=r"(a|aa)+$", limits=WorkspaceLimits(search_seconds=0.2))
    assert time.monotonic() - started < 5
    assert out.startswith("[stopped: the search took longer than 0.2 s") and "'(a+)+'" in out


def _in_thread(fn: Callable[[], object], fifo: Path) -> object:
    """Run ``fn`` in a daemon thread; fail (and unblock it) if it does not return within 10 s."""
    box: list[object] = []
    worker = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():
        for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, flags))
        pytest.fail("the tool blocked on a FIFO")
    return box[0]


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("write_file", {"path": "pipe", "content": "x"}),
        ("read_file", {"path": "pipe"}),
        ("edit_file", {"path": "pipe", "old_string": "a", "new_string": "b"}),
        ("write_file", {"path": "pipe-link", "content": "x"}),
    ],
)
def test_special_files_are_refused_without_blocking(ws: Path, name: str, args: dict[str, object]) -> None:
    fifo = ws / "pipe"
    os.mkfifo(fifo)
    (ws / "pipe-link").symlink_to(fifo)
    out = _in_thread(lambda: tools_for(ws)[name].invoke(args), fifo)
    assert isinstance(out, str)
    assert "'pipe" in out and "is a FIFO, not a regular file" in out, out
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_fifo_with_a_reader_is_not_written(ws: Path) -> None:
    fifo = ws / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        out = _in_thread(lambda: call(ws, "write_file", path="pipe", content="secret"), fifo)
        assert "is a FIFO, not a regular file" in str(out)
        assert os.read(reader, 100) == b""  # nothing was written into the pipe
    finally:
        os.close(reader)


def test_search_skips_special_files_without_blocking(ws: Path) -> None:
    fifo = ws / "src" / "pipe"
    os.mkfifo(fifo)
    out = _in_thread(lambda: call(ws, "search_files", pattern="hello"), fifo)
    assert out == "README.md:2: hello world"


# -- planmode's own data is out of reach (issue 10, item 12) -------------------------------------------------


def test_the_planmode_folder_is_refused_to_every_tool(ws: Path) -> None:
    (ws / ".planmode").mkdir()
    db = ws / ".planmode" / "planmode.sqlite"
    db.write_bytes(b"SQLite format 3\x00history")
    tools = tools_for(ws)
    for name, args in [
        ("read_file", {"path": ".planmode/planmode.sqlite"}),
        ("write_file", {"path": ".planmode/planmode.sqlite", "content": "gone"}),
        ("write_file", {"path": ".planmode/planmode.sqlite-wal", "content": "gone"}),
        ("write_file", {"path": "./src/../.planmode/new.txt", "content": "x"}),
        ("edit_file", {"path": ".planmode/planmode.sqlite", "old_string": "history", "new_string": "x"}),
        ("list_files", {"path": ".planmode"}),
        ("search_files", {"pattern": "history", "path": ".planmode"}),
        ("read_file", {"path": str(db)}),
    ]:
        out = tools[name].invoke(args)
        assert out.startswith("refused") and "planmode's own data" in out, (name, out)
    assert db.read_bytes() == b"SQLite format 3\x00history"
    assert sorted(p.name for p in (ws / ".planmode").iterdir()) == ["planmode.sqlite"]
    assert ".planmode (planmode's data; not accessible)" in call(ws, "list_files")
    assert "planmode.sqlite" not in call(ws, "list_files", recursive=True)
    assert call(ws, "search_files", pattern="history").startswith("No matches")


@pytest.mark.parametrize("where", ["inside", "outside", "relative"])
def test_the_database_in_use_and_its_companions_are_refused(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    db = ws / "runs.sqlite" if where != "outside" else tmp_path / "elsewhere" / "runs.sqlite"
    db.parent.mkdir(exist_ok=True)
    db.write_bytes(b"SQLite format 3\x00history")
    if where == "relative":
        monkeypatch.chdir(ws / "src")
        protected: str | Path = "../runs.sqlite"
    else:
        protected = db
    (ws / "db-link").symlink_to(db)
    tools = {t.name: t for t in workspace_tools(ws, protected=[protected])}
    for path in [
        "runs.sqlite",
        "runs.sqlite-wal",
        "runs.sqlite-shm",
        "runs.sqlite-journal",
        "db-link",
        str(db),
        str(db) + "-wal",
    ]:
        for name, args in [
            ("read_file", {"path": path}),
            ("write_file", {"path": path, "content": "gone"}),
            ("edit_file", {"path": path, "old_string": "history", "new_string": "x"}),
        ]:
            out = tools[name].invoke(args)
            if where == "outside" and not path.startswith(str(db)) and path != "db-link":
                assert "planmode's own data" not in out  # a same-named file in the workspace is a plain file
                continue
            assert out.startswith("refused"), (path, name, out)
    assert db.read_bytes() == b"SQLite format 3\x00history"
    assert not (db.parent / "runs.sqlite-wal").exists()
    assert tools["search_files"].invoke({"pattern": "history"}).startswith("No matches")


def test_the_per_thread_edit_lock_beside_the_database_is_refused(ws: Path) -> None:
    """`planmode.persistence.edit.edit_lock` flocks ``<db>.edit-lock``: an agent that replaced or removed it would let
    two plan edits on one thread race (each would lock a different file)."""
    from planmode.persistence import sqlite_checkpointer
    from planmode.persistence.edit import edit_lock

    db = ws / "runs.sqlite"
    saver = sqlite_checkpointer(db)
    try:
        with edit_lock(saver, "t"):
            pass
    finally:
        saver.conn.close()
    lock = ws / "runs.sqlite.edit-lock"
    assert lock.exists()
    before = lock.read_bytes()
    tools = {t.name: t for t in workspace_tools(ws, protected=[db])}
    for name, args in [
        ("read_file", {"path": "runs.sqlite.edit-lock"}),
        ("write_file", {"path": "runs.sqlite.edit-lock", "content": "gone"}),
        ("edit_file", {"path": "runs.sqlite.edit-lock", "old_string": "a", "new_string": "x"}),
        ("write_file", {"path": str(lock), "content": "gone"}),
    ]:
        out = tools[name].invoke(args)
        assert out.startswith("refused") and "planmode's own data" in out, (name, out)
    assert lock.read_bytes() == before
    assert "runs.sqlite.edit-lock (planmode's data; not accessible)" in tools["list_files"].invoke({"recursive": True})


_hostile_text = st.one_of(
    st.text(max_size=40),
    st.lists(
        st.sampled_from(
            [
                "a",
                "(",
                ")",
                "+",
                "*",
                "|",
                "?",
                "\\",
                "[",
                "]",
                "{",
                "}",
                ".",
                "$",
                "^",
                "/",
                "..",
                "\x00",
                "\ud83d",
                "\udcff",
                "\u202e",
                "~",
                "-",
                ".planmode",
                "README.md",
                "src",
            ]
        ),
        max_size=30,
    ).map("".join),
    st.just("x" * 5000),
)


@given(name=st.sampled_from(ALL_NAMES), a=_hostile_text, b=_hostile_text, c=_hostile_text, flag=st.booleans())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_hostile_arguments_always_come_back_as_a_result(
    ws: Path, name: str, a: str, b: str, c: str, flag: bool
) -> None:
    args: dict[str, object] = {
        "list_files": {"path": a, "pattern": b, "recursive": flag},
        "read_file": {"path": a},
        "search_files": {"pattern": a, "path": b or ".", "glob": c, "literal": flag},
        "write_file": {"path": "scratch/" + a, "content": b},
        "edit_file": {"path": a, "old_string": b, "new_string": c, "replace_all": flag},
    }[name]
    limits = WorkspaceLimits(search_seconds=0.5)
    message = tools_for(ws, limits)[name].invoke({"type": "tool_call", "id": "h", "name": name, "args": args})
    assert isinstance(message, ToolMessage)
    assert _encodable(str(message.content))
    assert (ws / "README.md").exists() and (ws / "src" / "pkg" / "mod.py").exists()


TEST_BODY = "import pytest\nfrom shapes import area_square\n\ndef test_area_square():\n    assert area_square(3) == 9\n"


@pytest.mark.parametrize(
    ("content", "removed"),
    [
        (f"<test>\n{TEST_BODY}</test>", "the <test> tags"),  # Qwen2.5-Coder-1.5B's test_shapes.py
        (f"```python\n{TEST_BODY}```", "the Markdown fence lines"),
        (f"\n```\n{TEST_BODY}```\n\n", "the Markdown fence lines"),
    ],
)
def test_a_python_file_sent_wrapped_is_written_as_its_code(ws: Path, content: str, removed: str) -> None:
    out = call(ws, "write_file", path="test_shapes.py", content=content)
    assert (ws / "test_shapes.py").read_text() == TEST_BODY
    assert f"{removed} around the code were removed" in out


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("page.html", f"<test>\n{TEST_BODY}</test>"),  # not a Python file: written as sent
        ("notes.md", f"```python\n{TEST_BODY}```"),
        ("bad.py", "<test>\ndef broken(:\n</test>"),  # the code inside does not compile either: as sent
        ("odd.py", f"<test>\n{TEST_BODY}</other>"),  # tags that do not pair
        ("ok.py", "x = '<test>'\n"),  # already Python
        ("nul.py", "<x>\n\x00\n</x>"),
        ("deep.py", "x = " + "-" * 100_000 + "1"),  # too deep to compile: compile() raised MemoryError out of it
        ("deeper.py", "```\nx = " + "-" * 100_000 + "1\n```"),
    ],
)
def test_other_content_is_written_exactly_as_sent(ws: Path, path: str, content: str) -> None:
    out = call(ws, "write_file", path=path, content=content)
    assert (ws / path).read_bytes() == content.encode()
    assert "removed" not in out


@pytest.mark.parametrize(
    ("path", "sent", "written"),
    [
        ("temps.txt", "0\\n100", "0\n100"),  # the 1.5B's temps.txt: report.py read it as one line
        ("data.csv", "name,score\\r\\na,10", "name,score\na,10"),
        ("temps.txt", "0\n100\\n", "0\n100\\n"),  # a real newline: written exactly
        ("x.py", "print('a\\nb')", "print('a\\nb')"),  # code that compiles: written exactly
        # code on one line with its breaks escaped, that compiles only as lines (the 1.5B's mathx.py)
        ("mathx.py", "def add(a, b):\\n    return a + b", "def add(a, b):\n    return a + b\n"),
        ("f.py", 'def f():\\n    return "a\\nb"', 'def f():\\n    return "a\\nb"'),  # not even as lines: exactly
        ("notes.txt", "no escapes", "no escapes"),
    ],
)
def test_a_text_files_lines_sent_escaped_are_written_as_lines(
    tmp_path: Path, path: str, sent: str, written: str
) -> None:
    said = call(tmp_path, "write_file", path=path, content=sent)
    assert (tmp_path / path).read_bytes().decode() == written
    assert ("escaped newlines" in said) is (sent != written)
