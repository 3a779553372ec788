"""The command line for real: subprocesses, a pseudo-terminal for the approval prompt, a real SQLite file,
and the real ChatOpenAI client talking to the scripted OpenAI-compatible server over HTTP."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pexpect
import pytest

from planmode.testing.openai_server import ScriptedOpenAIServer

pytestmark = pytest.mark.integration

PLANMODE = [sys.executable, "-m", "planmode.cli"]
PLAN_V1 = {
    "title": "Notes",
    "steps": [
        {  # issue 24: a write step carries acceptance (a plan without it is sent back)
            "id": "draft",
            "description": "Write notes.md with a heading",
            "tools": ["write_file"],
            "checks": [{"kind": "file", "path": "notes.md", "contains": ["# Notes"]}],
            "acceptance": "notes.md exists",
        },
        {"id": "check", "description": "Check the heading is there", "dependencies": ["draft"], "tools": ["read_file"]},
    ],
}
PLAN_V2 = {
    "title": "Notes, revised",
    "steps": [
        {
            "id": "draft",
            "description": "Write notes.md with a heading and a date",
            "tools": ["write_file"],
            "checks": [{"kind": "file", "path": "notes.md", "contains": ["# Notes"]}],
            "acceptance": "notes.md exists",
        },
        {"id": "check", "description": "Check the heading is there", "dependencies": ["draft"], "tools": ["read_file"]},
    ],
}


def _purpose(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    text = first["content"] if isinstance(first["content"], str) else json.dumps(first["content"])
    return text.split("\n", 1)[0].removeprefix("planmode:") if text.startswith("planmode:") else "unknown"


def _responder(seen: dict[str, int]) -> Any:
    def respond(body: dict[str, Any]) -> Any:
        purpose = _purpose(body)
        seen[purpose] = seen.get(purpose, 0) + 1
        if purpose == "plan":
            revised = any("rejected it with this feedback" in str(m.get("content")) for m in body["messages"])
            return json.dumps(PLAN_V2 if revised else PLAN_V1)
        if purpose == "execute":
            text = json.dumps(body["messages"])
            if "Step `draft`" in text and not any(m["role"] == "tool" for m in body["messages"]):
                return {
                    "tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "# Notes\n"}}]
                }
            return "done"
        if purpose == "verify":
            return json.dumps({"passed": True, "reason": ""})
        if purpose == "explore":
            return "empty workspace"
        return "All done."

    return respond


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PLANMODE_"))}
    env.update(LANGSMITH_TRACING="false", COLUMNS="160", TERM="xterm", **extra)
    return env


def test_interactive_reject_then_approve_in_a_real_pty(tmp_path: Path) -> None:
    seen: dict[str, int] = {}
    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(_responder(seen)) as srv:
        child = pexpect.spawn(
            PLANMODE[0],
            [
                *PLANMODE[1:],
                "run",
                "Write notes.md with a heading, then read it back",
                "--workspace",
                str(ws),
                "--db",
                str(db),
                "--thread",
                "t1",
                "--mode",
                "plan",
                "--base-url",
                srv.base_url,
                "--model",
                "scripted",
            ],
            env=_env(OPENAI_API_KEY="test"),
            encoding="utf-8",
            timeout=60,
            dimensions=(50, 160),
        )
        child.expect("Approve this plan")
        assert "Notes" in (child.before or "")
        child.sendline("r")
        child.expect("What should change")
        child.sendline("add a date to the heading")
        child.expect("Approve this plan")
        screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", (child.before or "").replace("\r", ""))
        assert "Notes, revised" in screen
        # 11.6: why it is asked again, and what changed since the revision shown, old -> new per field
        assert "Asked again: " in screen and "add a date to the heading" in screen
        assert "~ updated draft" in screen
        assert "description: Write notes.md with a heading → Write notes.md with a heading and a date" in screen
        child.sendline("a")
        child.expect(pexpect.EOF)
        output = child.before or ""
        child.close()
    assert child.exitstatus == 0, output
    assert "run finished" in output and "completed" in output
    assert (ws / "notes.md").read_text() == "# Notes\n"
    assert seen["plan"] == 2  # the rejection sent the planner back with the feedback
    # a reject-and-replan is counted as such in the report, not as a repair patch (issue 23, item 15)
    assert "patches=0 edits=0 replans=1" in output


def test_show_and_history_of_the_run(tmp_path: Path) -> None:
    seen: dict[str, int] = {}
    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(_responder(seen)) as srv:
        proc = subprocess.run(
            [
                *PLANMODE,
                "run",
                "Write notes.md, then read it back",
                "--workspace",
                str(tmp_path),
                "--db",
                str(db),
                "--thread",
                "t2",
                "--auto-approve",
                "--mode",
                "plan",
                "--base-url",
                srv.base_url,
            ],
            env=_env(OPENAI_API_KEY="test"),
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    show = subprocess.run([*PLANMODE, "show", "t2", "--db", str(db)], env=_env(), capture_output=True, text=True)
    assert show.returncode == 0 and "completed" in show.stdout and "draft" in show.stdout
    assert 'file notes.md exists, contains "# Notes"' in show.stdout  # each step's declared checks are shown
    hist = subprocess.run([*PLANMODE, "history", "t2", "--db", str(db)], env=_env(), capture_output=True, text=True)
    assert hist.returncode == 0 and "Snapshots" in hist.stdout, hist.stdout + hist.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["run", "do things"], {}, "OPENAI_API_KEY is not set"),
        (["show", "no-such-thread"], {}, "no run with thread id"),
        (["history", "no-such-thread"], {}, "no run with thread id"),
        (["rollback", "no-such-thread", "1"], {}, "no run with thread id"),
        (["show", "t", "--db", "/proc/planmode-nope/x.sqlite"], {}, "no database at this path"),
        (["run", "x", "--db", "/proc/planmode-nope/x.sqlite"], {"OPENAI_API_KEY": "k"}, "cannot use database file"),
    ],
)
def test_user_errors_are_one_clear_line(tmp_path: Path, args: list[str], env: dict[str, str], expected: str) -> None:
    if "--db" not in args:
        from planmode.persistence import sqlite_checkpointer

        sqlite_checkpointer(tmp_path / "runs.sqlite").conn.close()  # an existing, empty planmode database
        args = [*args, "--db", str(tmp_path / "runs.sqlite")]
    proc = subprocess.run(
        [*PLANMODE, *args], env=_env(**env), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert expected in out
    assert "Traceback" not in out


def test_unreachable_base_url_pauses_the_run_cleanly(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    proc = subprocess.run(
        [
            *PLANMODE,
            "run",
            "Write notes.md, then read it back",
            "--workspace",
            str(tmp_path),
            "--db",
            str(tmp_path / "r.sqlite"),
            "--auto-approve",
            "--mode",
            "plan",
            "--base-url",
            url,
        ],
        env=_env(OPENAI_API_KEY="test"),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 5, out  # model unavailable: paused, resumable
    assert "Traceback" not in out
    assert "Model unavailable" in out and "planmode resume" in out
    assert "Connection error" in out or "connect" in out.lower()


def test_edit_in_editor_then_ctrl_c_then_resume(tmp_path: Path) -> None:
    """In a real pty: edit the plan in $EDITOR (a script that adds a step), approve the edit, press Ctrl-C
    while a step runs, then `planmode resume` finishes the run without re-running what was done."""
    from planmode.testing.openai_server import Fault

    seen: dict[str, int] = {}
    base = _responder(seen)
    executed: list[str] = []

    def slow(body: dict[str, Any]) -> Any:
        answer = base(body)
        if _purpose(body) == "execute" and not any(m["role"] == "tool" for m in body["messages"]):
            text = json.dumps(body["messages"])
            executed.append("draft" if "Step `draft`" in text else "check" if "Step `check`" in text else "other")
            if "Step `check`" in text and executed.count("check") == 1:  # the first time: Ctrl-C lands in it
                return Fault(delay=30.0, then=answer if isinstance(answer, str) else "done")
        return answer

    editor = tmp_path / "add_step.py"
    editor.write_text(  # the form is TOML (issue 23, item 14): a new step is a new [[steps]] block
        "import sys\n"
        "with open(sys.argv[1], 'a') as fh:\n"
        '    fh.write(\'\\n[[steps]]\\nid = "wrap_up"\\ndescription = "Say goodbye"\\nafter = ["check"]\\n\')\n'
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(slow) as srv:
        env = _env(OPENAI_API_KEY="test", EDITOR=f"{sys.executable} {editor}")
        child = pexpect.spawn(
            PLANMODE[0],
            [
                *PLANMODE[1:],
                "run",
                "Write notes.md with a heading, then read it back",
                "--workspace",
                str(ws),
                "--db",
                str(db),
                "--thread",
                "t3",
                "--mode",
                "plan",
                "--base-url",
                srv.base_url,
            ],
            env=env,
            encoding="utf-8",
            timeout=60,
            dimensions=(50, 160),
        )
        child.expect("Approve this plan")
        child.sendline("e")
        child.expect("Approve the edited plan")  # the edit is shown with its diff before anything runs
        assert "wrap_up" in (child.before or "") and "added" in (child.before or "")
        child.sendline("a")
        child.expect(r"step started: .{0,16}check")
        time.sleep(0.5)  # the model call of `check` is in flight (it answers after 30 s)
        pressed = time.monotonic()
        child.sendintr()
        child.expect(pexpect.EOF)
        waited = time.monotonic() - pressed
        out = child.before or ""
        child.close()
        assert child.exitstatus == 130, out
        assert waited < 10, f"Ctrl-C took {waited:.1f} s"  # not the 30 s the model call takes
        assert f"planmode resume t3 --db {db}" in out.replace("\r\n", "").replace("\n", "")
        proc = subprocess.run(
            [*PLANMODE, "resume", "t3", "--db", str(db), "--workspace", str(ws)],
            env=_env(OPENAI_API_KEY="test"),
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "completed" in proc.stdout and "wrap_up" in proc.stdout
    assert "patches=0 edits=1 replans=0" in proc.stdout  # a human edit is not a repair patch (issue 23, item 15)
    assert executed.count("draft") == 1  # done before Ctrl-C: not executed again on resume
