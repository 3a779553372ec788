"""``planmode diff`` and ``planmode rollback --files`` for real (issue 23 item 16): subprocesses, a pty, a real
SQLite file, the real ChatOpenAI client talking to the scripted OpenAI-compatible server.

The plan: ``draft`` creates ``notes.md`` (markup and an escape sequence in it) and ``new.txt``; ``fix`` (after
``draft``) edits ``notes.md``. ``keep.txt`` exists before the run and is overwritten by ``fix``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pexpect
import pytest

from planmode.testing.openai_server import ScriptedOpenAIServer
from tests.cli.test_cli_daily import _purpose, cli, flat, spawn

pytestmark = pytest.mark.integration

CONTENT = "# Notes [bold]loud[/bold]\n\x1b[31mred\x1b[0m\n"
PLAN = {
    "title": "Notes",
    "steps": [
        {
            "id": "draft",
            "description": "Write notes.md and new.txt",
            "tools": ["write_file"],
            "acceptance": "notes.md and new.txt exist",
        },
        {
            "id": "fix",
            "description": "Fix the title",
            "dependencies": ["draft"],
            "tools": ["edit_file", "write_file"],
            "acceptance": "notes.md exists",
        },
    ],
}
CALLS = {
    "draft": [
        {"name": "write_file", "arguments": {"path": "notes.md", "content": CONTENT}},
        {"name": "write_file", "arguments": {"path": "new.txt", "content": "new\n"}},
    ],
    "fix": [
        {"name": "edit_file", "arguments": {"path": "notes.md", "old_string": "# Notes", "new_string": "# Better"}},
        {"name": "write_file", "arguments": {"path": "keep.txt", "content": "overwritten\n"}},
    ],
}


def respond(body: dict[str, Any]) -> Any:
    purpose = _purpose(body)
    if purpose == "plan":
        return json.dumps(PLAN)
    if purpose == "execute":
        text = json.dumps(body["messages"])
        for step, calls in CALLS.items():
            if f"Step `{step}`" in text and not any(m["role"] == "tool" for m in body["messages"]):
                return {"tool_calls": calls}
        return "done"
    if purpose == "verify":
        return json.dumps({"passed": True, "reason": ""})
    if purpose == "explore":
        return "empty workspace"
    return "All done."


@pytest.fixture
def ran(tmp_path: Path) -> tuple[Path, Path, str]:
    ws, db = tmp_path / "ws", tmp_path / "runs.sqlite"
    ws.mkdir()
    (ws / "keep.txt").write_text("kept\n")
    with ScriptedOpenAIServer(respond) as srv:
        proc = cli(
            "run", "Write the notes, then fix them", "--workspace", str(ws), "--db", str(db), "--thread", "t1",
            "--mode", "plan", "--auto-approve", "--base-url", srv.base_url, OPENAI_API_KEY="test",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (ws / "notes.md").read_text() == CONTENT.replace("# Notes", "# Better")
    return ws, db, proc.stdout


def first_checkpoint(db: Path) -> str:
    from planmode.graph import build_graph
    from planmode.persistence import sqlite_checkpointer

    graph = build_graph(checkpointer=sqlite_checkpointer(db))
    return str(
        list(graph.get_state_history({"configurable": {"thread_id": "t1"}}))[-1].config["configurable"]["checkpoint_id"]
    )


def test_the_run_names_the_files_each_step_changed(ran: tuple[Path, Path, str]) -> None:
    _, _, out = ran
    assert "draft changed: new.txt, notes.md" in out  # as the step finishes
    assert "fix changed: keep.txt, notes.md" in out
    assert "Files changed by step draft: new.txt (created), notes.md (created)\n" in out  # one line per step
    assert "Files changed by step fix: keep.txt, notes.md\n" in out  # by path: the calls of a turn run in parallel


def test_diff_piped_is_the_exact_patch(ran: tuple[Path, Path, str]) -> None:
    _, db, _ = ran
    whole = cli("diff", "t1", "--db", str(db))
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout == (
        "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+new\n"
        + "--- /dev/null\n+++ b/notes.md\n@@ -0,0 +1,2 @@\n"
        + "".join("+" + line for line in CONTENT.replace("# Notes", "# Better").splitlines(keepends=True))
        + "--- a/keep.txt\n+++ b/keep.txt\n@@ -1 +1 @@\n-kept\n+overwritten\n"
    )  # raw: the escape sequence and the markup are the file's bytes, untouched; by step, then by path
    step = cli("diff", "t1", "fix", "--db", str(db))
    assert "-# Notes [bold]loud[/bold]\n+# Better [bold]loud[/bold]\n" in step.stdout
    assert "new.txt" not in step.stdout
    none = cli("diff", "t1", "nosuch", "--db", str(db))
    assert none.returncode == 0 and "No recorded file changes for step 'nosuch'" in none.stdout


def test_diff_at_a_terminal_shows_markup_and_escapes_as_text(ran: tuple[Path, Path, str]) -> None:
    _, db, _ = ran
    child = spawn(["diff", "t1", "fix", "--db", str(db)])
    child.expect(pexpect.EOF)
    out = flat(child.before)
    assert "notes.md (modified, step fix)" in out
    assert "+# Better [bold]loud[/bold]" in out  # not bold: the brackets are shown
    assert "\\x1b[31mred\\x1b[0m" in out  # the escape sequence shown, never sent to the terminal
    assert "\x1b[31mred" not in child.before


def test_rollback_files_to_before_any_step_restores_and_deletes(ran: tuple[Path, Path, str]) -> None:
    ws, db, _ = ran
    back = cli("rollback", "t1", first_checkpoint(db), "--files", "--db", str(db))
    assert back.returncode == 0, back.stdout + back.stderr
    assert sorted(p.name for p in ws.iterdir()) == ["keep.txt"]  # notes.md and new.txt were created by the run
    assert (ws / "keep.txt").read_text() == "kept\n"
    assert "Restored workspace files: " in back.stdout and "new.txt (deleted: created after that point)" in back.stdout
    again = cli("diff", "t1", "--db", str(db))
    assert "No recorded file changes" in again.stdout  # undone changes are not the run's any more


def test_rollback_files_refuses_when_a_file_changed_outside_the_run(ran: tuple[Path, Path, str]) -> None:
    ws, db, _ = ran
    (ws / "notes.md").write_text("my own edit\n")
    (ws / "keep.txt").unlink()
    (ws / "new.txt").unlink()  # created by the run: gone already, as it was then (not a conflict)
    heads = cli("history", "t1", "--db", str(db)).stdout
    back = cli("rollback", "t1", first_checkpoint(db), "--files", "--db", str(db), COLUMNS="400")
    assert back.returncode == 2
    assert "2 file(s) cannot be restored" in back.stderr and "nothing was rolled back" in back.stderr
    assert "notes.md (changed outside the run since planmode last wrote it)" in back.stderr
    assert "keep.txt (deleted outside the run since planmode last wrote it)" in back.stderr
    assert "new.txt" not in back.stderr
    assert (ws / "notes.md").read_text() == "my own edit\n" and not (ws / "keep.txt").exists()
    assert cli("history", "t1", "--db", str(db)).stdout == heads  # the run was not rolled back either


def test_rollback_without_files_says_how_to_restore_them(ran: tuple[Path, Path, str]) -> None:
    ws, db, _ = ran
    back = cli("rollback", "t1", "1", "--db", str(db))
    assert back.returncode == 0 and "add --files" in back.stdout
    assert (ws / "new.txt").exists()


def test_diff_is_read_only_on_someone_elses_database(tmp_path: Path) -> None:
    import sqlite3

    other = tmp_path / "app.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
    before = other.read_bytes()
    proc = cli("diff", "t1", "--db", str(other))
    assert proc.returncode == 2 and "not a planmode database" in proc.stderr
    assert other.read_bytes() == before
