"""A failed run leaves no damage it does not offer to undo (issue 45 item 7): its last screen lists each file it
changed and offers ``planmode rollback THREAD START --files`` to the run's start, as a question at a terminal (only
a typed ``y`` undoes, typeahead discarded) or as the exact command otherwise.

The run: step ``fix`` overwrites the user's ``shop.py`` with text that is not Python and creates ``new.txt``; its
check fails, the reflection gives up, and the run ends failed (exit 1)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pexpect
import pytest

from planmode.testing.openai_server import ScriptedOpenAIServer
from tests.cli.test_cli_daily import _purpose, cli, flat, spawn

pytestmark = pytest.mark.integration

ORIGINAL = "RATE = 0.1\n\n\ndef total(price):\n    return price * (1 - RATE)\n"
DAMAGE = "discount_rate:0.1 total_price:200.0\n"
PLAN = {
    "title": "Shop",
    "steps": [
        {
            "id": "fix",
            "description": "Fix the discount in shop.py",
            "tools": ["write_file"],
            "acceptance": "shop.py applies a 10% discount",
        }
    ],
}


def respond(body: dict[str, Any]) -> Any:
    purpose = _purpose(body)
    if purpose == "plan":
        return json.dumps(PLAN)
    if purpose == "execute":
        if not any(m["role"] == "tool" for m in body["messages"]):
            return {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": "shop.py", "content": DAMAGE}},
                    {"name": "write_file", "arguments": {"path": "new.txt", "content": "n\n"}},
                ]
            }
        return "done"
    if purpose == "verify":
        return json.dumps({"passed": False, "reason": "shop.py is not Python"})
    if purpose == "reflect":
        return json.dumps({"assessment": "failed", "reasoning": "cannot fix it"})
    if purpose == "explore":
        return "shop.py"
    return "It failed."


def _args(ws: Path, db: Path, url: str) -> list[str]:
    return [
        "run", "fix the discount in shop.py", "--workspace", str(ws), "--db", str(db), "--thread", "t1",
        "--mode", "plan", "--auto-approve", "--max-attempts", "1", "--base-url", url,
    ]  # fmt: skip


def _workspace(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "shop.py").write_text(ORIGINAL)
    return ws, tmp_path / "runs.sqlite"


def _command(out: str) -> list[str]:
    """The rollback command the screen printed (one line), as arguments."""
    line = next(x for x in flat(out).splitlines() if "planmode rollback t1 " in x)
    return shlex.split(line[line.index("planmode rollback") :])[1:]


def _damaged(ws: Path) -> bool:
    return (ws / "shop.py").read_text() == DAMAGE and (ws / "new.txt").exists()


def test_at_a_terminal_a_failed_run_lists_its_files_and_undoes_them_on_an_explicit_yes(tmp_path: Path) -> None:
    ws, db = _workspace(tmp_path)
    with ScriptedOpenAIServer(respond) as srv:
        child = spawn(_args(ws, db, srv.base_url), OPENAI_API_KEY="test")
        child.expect("step failed")
        child.send("y\r")  # typed before the question: discarded
        child.expect("Undo these changes")
        screen = flat(child.before or "")
        tail = screen[screen.index("left these changes") :]
        assert "shop.py" in tail and "new.txt (created)" in tail and "(step fix)" in tail
        assert child.expect(["Restored", "Please answer", pexpect.TIMEOUT], timeout=3) == 2
        assert _damaged(ws)  # the early key undid nothing
        child.send("\r")  # Enter alone is no answer
        child.expect("Please answer yes, no")
        child.sendline("y")
        child.expect(pexpect.EOF)
        out = flat(child.before or "")
        child.close()
    assert child.exitstatus == 1, out
    assert "Restored workspace files" in out and "The run is back at its start" in out
    assert (ws / "shop.py").read_text() == ORIGINAL and not (ws / "new.txt").exists()


def test_at_a_terminal_no_leaves_the_files_and_prints_the_command_that_undoes_them(tmp_path: Path) -> None:
    ws, db = _workspace(tmp_path)
    with ScriptedOpenAIServer(respond) as srv:
        child = spawn(_args(ws, db, srv.base_url), OPENAI_API_KEY="test")
        child.expect("Undo these changes")
        child.sendline("n")
        child.expect(pexpect.EOF)
        out = child.before or ""
        child.close()
    assert child.exitstatus == 1
    assert _damaged(ws)
    undo = cli(*_command(out), cwd=tmp_path / "ws")
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert (ws / "shop.py").read_text() == ORIGINAL and not (ws / "new.txt").exists()


def test_without_a_terminal_the_exact_command_is_printed_and_undoes_the_run(tmp_path: Path) -> None:
    ws, db = _workspace(tmp_path)
    with ScriptedOpenAIServer(respond) as srv:
        proc = cli(*_args(ws, db, srv.base_url), OPENAI_API_KEY="test")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "left these changes in the workspace" in proc.stdout and "Undo these changes" not in proc.stdout
    assert _damaged(ws)
    undo = cli(*_command(proc.stdout), cwd=tmp_path)  # from another folder: the command names the database
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert (ws / "shop.py").read_text() == ORIGINAL and not (ws / "new.txt").exists()


def test_a_file_changed_after_the_run_is_not_overwritten_by_the_undo(tmp_path: Path) -> None:
    ws, db = _workspace(tmp_path)
    with ScriptedOpenAIServer(respond) as srv:
        child = spawn(_args(ws, db, srv.base_url), OPENAI_API_KEY="test")
        child.expect("Undo these changes")
        (ws / "shop.py").write_text("# the user's own fix\n")  # changed outside the run meanwhile
        child.sendline("yes")
        child.expect(pexpect.EOF)
        out = flat(child.before or "")
        child.close()
    assert child.exitstatus == 1
    assert "Nothing was undone" in out and "planmode rollback t1 " in out
    assert (ws / "shop.py").read_text() == "# the user's own fix\n" and (ws / "new.txt").exists()
