"""The command line for daily use, for real: subprocesses and a pseudo-terminal, a real SQLite file, and the real
ChatOpenAI client talking to the scripted OpenAI-compatible server over HTTP (issue 10.2 and issue 11)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect
import pytest

from planmode.testing.openai_server import ScriptedOpenAIServer

pytestmark = pytest.mark.integration

PLANMODE = [sys.executable, "-m", "planmode.cli"]
HOSTILE = ["dict[str, list[int]]", "[/b]", "[bold]", "pip install 'planmode[postgres]'"]
PLAN = {
    "title": "Notes [bold]",
    "steps": [
        {
            "id": "draft",
            "description": "Write notes.md: annotate as dict[str, list[int]]",
            "tools": ["write_file"],
            "acceptance": "[/b] is kept",
        },
        {
            "id": "check",
            "description": "Check the notes; pip install 'planmode[postgres]'",
            "dependencies": ["draft"],
            "tools": ["read_file"],
        },
    ],
}
FINAL = "Done: dict[str, list[int]] [/b] [bold] pip install 'planmode[postgres]'"


def _purpose(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    text = first["content"] if isinstance(first["content"], str) else json.dumps(first["content"])
    return text.split("\n", 1)[0].removeprefix("planmode:") if text.startswith("planmode:") else "unknown"


def responder(
    seen: dict[str, int] | None = None, *, plan: dict[str, Any] = PLAN, respond: str = "Four."
) -> Callable[[dict[str, Any]], Any]:
    seen = {} if seen is None else seen

    def respond_(body: dict[str, Any]) -> Any:
        purpose = _purpose(body)
        seen[purpose] = seen.get(purpose, 0) + 1
        if purpose == "plan":
            return json.dumps(plan)
        if purpose == "execute":
            text = json.dumps(body["messages"])
            if "Step `draft`" in text and not any(m["role"] == "tool" for m in body["messages"]):
                return {
                    "tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "# Notes\n"}}]
                }
            return "step result [/b] dict[str, list[int]]"
        if purpose == "verify":
            return json.dumps({"passed": True, "reason": ""})
        if purpose == "explore":
            return "empty workspace"
        if purpose == "detect":
            return json.dumps({"needs_plan": False, "reason": "simple"})
        if purpose == "respond":
            return respond
        return FINAL

    return respond_


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PLANMODE_"))}
    out.update({"LANGSMITH_TRACING": "false", "COLUMNS": "200", "TERM": "xterm", **extra})
    return out


def cli(*args: str, cwd: Path | None = None, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PLANMODE, *args],
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
    )


def spawn(args: list[str], **extra: str) -> pexpect.spawn:
    return pexpect.spawn(
        PLANMODE[0], [*PLANMODE[1:], *args], env=env(**extra), encoding="utf-8", timeout=60, dimensions=(60, 200)
    )


def flat(text: str) -> str:
    """A terminal's output without carriage returns and colour codes."""
    import re

    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text.replace("\r", ""))


# -- 10.2: every screen prints model, tool, human and exception text literally --------------------------------


def test_markup_like_text_is_literal_on_run_approval_show_history_resume_and_errors(tmp_path: Path) -> None:
    ws, db = tmp_path / "ws", tmp_path / "runs.sqlite"
    ws.mkdir()
    with ScriptedOpenAIServer(responder()) as srv:
        common = ["--db", str(db), "--base-url", srv.base_url, "--model", "scripted"]
        # a headless run that stops for approval: the plan is printed, then the message; exit 3
        first = cli(
            "run",
            "Write notes [/b]",
            "--workspace",
            str(ws),
            "--thread",
            "t1",
            "--mode",
            "plan",
            *common,
            OPENAI_API_KEY="test",
        )
        out = first.stdout
        assert first.returncode == 3, out + first.stderr
        assert "error:" not in out
        for s in ("Notes [bold]", "dict[str, list[int]]", "[/b] is kept", "pip install 'planmode[postgres]'"):
            assert s in out
        assert out.index("dict[str, list[int]]") < out.index("needs approval")
        assert f"planmode resume t1 --db {db}" in out

        # the approval prompt in a terminal: the plan and the prompt literally, then approve
        child = spawn(["resume", "t1", "--db", str(db)], OPENAI_API_KEY="test")
        child.expect("Approve this plan")
        screen = flat(child.before or "")
        child.expect(r"\[a/e/r/c/q\]")
        prompt = flat(child.before or "")
        assert "dict[str, list[int]]" in screen and "Notes [bold]" in screen
        assert "approve / edit / reject / cancel / quit" in prompt
        child.sendline("a")
        child.expect(pexpect.EOF)
        run_out = flat(child.before or "")
        child.close()
        assert child.exitstatus == 0, run_out
        assert FINAL in run_out and "step result [/b] dict[str, list[int]]" in run_out

    shown = cli("show", "t1", "--db", str(db))
    assert shown.returncode == 0 and FINAL in shown.stdout and "dict[str, list[int]]" in shown.stdout
    hist = cli("history", "t1", "--db", str(db))
    assert hist.returncode == 0 and "Snapshots" in hist.stdout
    bad = cli("run", "x", "--workspace", str(tmp_path / "[bold]nope[/b]"), OPENAI_API_KEY="k")
    assert bad.returncode == 2 and "[bold]nope[/b]" in bad.stderr and "Traceback" not in bad.stdout + bad.stderr


# -- 11.1: a run remembers its workspace and endpoint; resume can override them --------------------------------


def test_resume_uses_the_runs_workspace_from_anywhere_and_a_new_base_url(tmp_path: Path) -> None:
    ws, elsewhere, db = tmp_path / "wsA", tmp_path / "elsewhere", tmp_path / "runs.sqlite"
    ws.mkdir()
    elsewhere.mkdir()
    with ScriptedOpenAIServer(responder()) as srv:
        first = cli(
            "run",
            "Write notes.md, then read it back",
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
            OPENAI_API_KEY="test",
        )
    assert first.returncode == 3, first.stdout + first.stderr
    # the first server is gone; a new one on another port, and resume from another folder
    with ScriptedOpenAIServer(responder()) as srv2:
        proc = cli(
            "resume",
            "t1",
            "--db",
            str(db),
            "--base-url",
            srv2.base_url,
            "--auto-approve",
            cwd=elsewhere,
            OPENAI_API_KEY="test",
        )
        assert srv2.requests, "the resume did not use the new base URL"
        url2 = srv2.base_url
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (ws / "notes.md").read_text() == "# Notes\n"
    assert not (elsewhere / "notes.md").exists()
    assert f"workspace {ws}" in proc.stdout
    assert "tool: write_file notes.md" in proc.stdout  # 11.12: tool calls as they run ...
    assert "Files changed by step draft: notes.md (created)" in proc.stdout  # ... and at the end, a line per step
    # the endpoint chosen at resume is remembered in the run's settings; the run is finished now, so a next resume
    # (from yet another folder) says so (issue 23 item 4) instead of running again
    from planmode.context import settings_dict
    from planmode.graph import build_graph
    from planmode.persistence import sqlite_checkpointer

    head = build_graph(checkpointer=sqlite_checkpointer(db)).get_state({"configurable": {"thread_id": "t1"}})
    assert settings_dict(head.values["settings"])["base_url"] == url2
    again = cli("resume", "t1", "--db", str(db), cwd=tmp_path, OPENAI_API_KEY="test")
    assert again.returncode == 2 and "is finished (completed)" in again.stderr, again.stdout + again.stderr


def test_run_settings_come_from_flags_and_planmode_env_vars(tmp_path: Path) -> None:
    from planmode.context import settings_dict
    from planmode.graph import build_graph
    from planmode.persistence import sqlite_checkpointer

    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(responder()) as srv:
        url = srv.base_url
        proc = cli(
            "run",
            "Write notes.md, then read it back",
            "--workspace",
            str(tmp_path),
            "--db",
            str(db),
            "--thread",
            "t1",
            "--mode",
            "plan",
            "--base-url",
            url,
            "--max-steps",
            "7",
            "--structured-output",
            "tool_calling",
            "--normalize-messages",
            "--reapprove-patches",
            "--request-timeout",
            "33",
            OPENAI_API_KEY="test",
            PLANMODE_MAX_ATTEMPTS="5",
            PLANMODE_MAX_REFLECT_ATTEMPTS="4",
            PLANMODE_APPROVAL="auto",
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    graph = build_graph(checkpointer=sqlite_checkpointer(db))
    settings = settings_dict(graph.get_state({"configurable": {"thread_id": "t1"}}).values["settings"])
    assert settings["max_steps"] == 7 and settings["max_attempts"] == 5 and settings["approval"] == "auto"
    assert settings["max_reflect_attempts"] == 4
    assert settings["structured_output"] == "tool_calling" and settings["normalize_messages"] is True
    assert settings["reapprove_patches"] is True and settings["request_timeout"] == 33.0
    assert settings["workspace"] == str(tmp_path.resolve()) and settings["base_url"] == url
    # 11.8: --approval auto (like --auto-approve) shows the plan before running it
    assert (
        proc.stdout.index("Notes [bold]")
        < proc.stdout.index("approved automatically")
        < proc.stdout.index("step started")
    )


# -- 11.2 / 11.3: read-only commands create nothing; bad input is one line and a non-zero exit -----------------


@pytest.mark.parametrize("command", [["show", "t"], ["history", "t"], ["rollback", "t", "1"], ["resume", "t"]])
def test_read_only_commands_never_create_a_database(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "typo.sqlite"
    proc = cli(*command, "--db", str(missing), cwd=tmp_path)
    assert proc.returncode == 2
    assert str(missing) in proc.stderr and "no database" in proc.stderr  # planmode's own errors: on stderr
    assert not missing.exists()
    url = cli(*command, "--db", "mysql://x", cwd=tmp_path)
    assert url.returncode == 2 and "unsupported database URL 'mysql://x'" in url.stderr
    assert list(tmp_path.iterdir()) == []


def _damaged_db(tmp_path: Path) -> Path:
    """A real planmode database with a finished run, then pages overwritten in the middle of the file."""
    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(responder()) as srv:
        proc = cli(
            "run",
            "Write notes.md, then read it back",
            "--workspace",
            str(tmp_path),
            "--db",
            str(db),
            "--thread",
            "t1",
            "--mode",
            "plan",
            "--auto-approve",
            "--base-url",
            srv.base_url,
            OPENAI_API_KEY="test",
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(db.read_bytes())
    page = 4096
    for start in range(page * 2, len(data) - page, page * 2):
        data[start : start + 64] = b"\xff" * 64
    db.write_bytes(bytes(data))
    return db


def test_a_damaged_database_is_one_line_for_every_command(tmp_path: Path) -> None:
    db = _damaged_db(tmp_path)
    for command in (["show", "t1"], ["history", "t1"], ["ls"], ["rollback", "t1", "1"], ["resume", "t1"]):
        proc = cli(*command, "--db", str(db), OPENAI_API_KEY="test")
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0, (command, out)
        assert "Traceback" not in out, (command, out)
        assert out.strip().startswith("error:") and len(out.strip().splitlines()) <= 2, (command, out)


@pytest.mark.parametrize(
    "args",
    [
        ["history", "t", "--limit", "0"],
        ["history", "t", "--limit", "-1"],
        ["run", "x", "--mode", "foo"],
        ["run", "x", "--max-parallel", "0"],
        ["run", "x", "--max-parallel", "-3"],
        ["run", "x", "--max-steps", "0"],
        ["run", "x", "--request-timeout", "0"],
        ["run", "x", "--structured-output", "xml"],
    ],
)
def test_bad_values_are_refused_with_one_error_line(tmp_path: Path, args: list[str]) -> None:
    proc = cli(*args, "--db", str(tmp_path / "r.sqlite"), OPENAI_API_KEY="k")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out
    assert sum(line.startswith("Error:") for line in out.splitlines()) == 1
    assert not (tmp_path / "r.sqlite").exists()


def test_bad_values_in_planmode_env_vars_are_refused(tmp_path: Path) -> None:
    proc = cli("run", "x", "--db", str(tmp_path / "r.sqlite"), OPENAI_API_KEY="k", PLANMODE_MAX_ATTEMPTS="0")
    assert proc.returncode == 2 and "PLANMODE_MAX_ATTEMPTS" in proc.stdout + proc.stderr


def test_the_demo_runs_on_an_ascii_terminal(tmp_path: Path) -> None:
    proc = cli("demo", "--db", str(tmp_path / "d.sqlite"), PYTHONIOENCODING="ascii", timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "Traceback" not in out and "UnicodeEncodeError" not in out
    assert "run finished: completed" in out


# -- 11.4 / 11.5: exit codes, and a direct answer says so --------------------------------------------------------


def test_a_direct_answer_says_so_and_names_mode_plan(tmp_path: Path) -> None:
    seen: dict[str, int] = {}
    with ScriptedOpenAIServer(responder(seen, respond="Four [bold].")) as srv:
        proc = cli(
            "run",
            "What is 2+2?",
            "--workspace",
            str(tmp_path),
            "--db",
            str(tmp_path / "r.sqlite"),
            "--base-url",
            srv.base_url,
            OPENAI_API_KEY="test",
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Four [bold]." in proc.stdout
    assert "Answered directly" in proc.stdout and "--mode plan" in proc.stdout
    assert "plan" not in seen


def test_cancel_at_the_approval_exits_4(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(responder()) as srv:
        child = spawn(
            [
                "run",
                "Write notes.md, then read it back",
                "--workspace",
                str(tmp_path),
                "--db",
                str(tmp_path / "r.sqlite"),
                "--mode",
                "plan",
                "--base-url",
                srv.base_url,
            ],
            OPENAI_API_KEY="test",
        )
        child.expect("Approve this plan")
        child.sendline("c")
        child.expect("Why")
        child.sendline("not now [/b]")
        child.expect(pexpect.EOF)
        out = flat(child.before or "")
        child.close()
    assert child.exitstatus == 4, out
    assert "not now [/b]" in out


# -- 11.7: $EDITOR -----------------------------------------------------------------------------------------------


def test_a_typo_reopens_the_editor_with_the_error_on_top_at_the_right_line(tmp_path: Path) -> None:
    """The plan is edited as a form (TOML, issue 23 item 14): no internal fields; a typo reopens the editor with
    the error on top, its line number that of the reopened file (comments counted), the person's comments kept."""
    log = tmp_path / "editor.log"
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import pathlib, re, sys\n"
        f"log = pathlib.Path({str(log)!r})\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "text = p.read_text()\n"
        "calls = log.read_text().count('CALL') if log.exists() else 0\n"
        "log.write_text((log.read_text() if log.exists() else '') + 'CALL\\n' + text + '\\n')\n"
        "if calls == 0:\n"
        "    text = text.replace('\\n[[steps]]', '\\n# my own note, kept\\n[[steps]]', 1)\n"
        "    p.write_text(text.replace('title = \"', 'title = ', 1))  # a typo: the opening quote is gone\n"
        "else:\n"
        "    fixed = text.replace('title = Notes', 'title = \"Notes', 1)  # the human fixes the typo\n"
        "    new = 'description = \"Write notes.md with a date\"'\n"
        "    fixed = re.sub(r'description = \"Write notes.md: [^\\n]*', new, fixed, count=1)\n"
        "    p.write_text(fixed)\n"
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    seen: dict[str, int] = {}
    with ScriptedOpenAIServer(responder(seen)) as srv:
        child = spawn(
            [
                "run",
                "Write notes.md, then read it back",
                "--workspace",
                str(ws),
                "--db",
                str(tmp_path / "r.sqlite"),
                "--mode",
                "plan",
                "--base-url",
                srv.base_url,
            ],
            OPENAI_API_KEY="test",
            EDITOR=f"{sys.executable} {editor}",
        )
        child.expect("Approve this plan")
        child.sendline("e")
        child.expect("Approve the edited plan")
        preview = flat(child.before or "")
        assert "description: Write notes.md: annotate as dict[str, list[int]] → Write notes.md with a date" in preview
        assert "complexity" not in preview  # an untouched field the form does not show is not changed
        assert "execute" not in seen  # nothing ran before the edit is approved
        child.sendline("a")
        child.expect(pexpect.EOF)
        out = flat(child.before or "")
        child.close()
    assert child.exitstatus == 0, out
    first, second = log.read_text().split("CALL\n")[1:3]
    assert "status" not in first and "complexity" not in first  # no internal fields in the form
    assert 'tools = ["write_file"]  # changes things: write_file' in first
    assert second.startswith("# ERROR: not a valid form")  # the error is on top of the reopened file
    import re

    line = int(re.search(r"\(line (\d+), column \d+\)", second.splitlines()[0]).group(1))  # type: ignore[union-attr]
    assert second.splitlines()[line - 1].startswith("title = Notes"), (line, second)  # the line named is the typo
    assert "# my own note, kept" in second  # the person's comment survives the reopening
    assert "Write notes.md with a date" in out


# -- 11.9: history prefixes at 80 columns, rollback by prefix, and what rollback does not restore ---------------


def test_history_at_80_columns_prints_prefixes_rollback_accepts(tmp_path: Path) -> None:
    import re

    from planmode.graph import build_graph
    from planmode.persistence import sqlite_checkpointer

    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(responder()) as srv:
        proc = cli(
            "run",
            "Write notes.md, then read it back",
            "--workspace",
            str(tmp_path),
            "--db",
            str(db),
            "--thread",
            "t1",
            "--mode",
            "plan",
            "--auto-approve",
            "--base-url",
            srv.base_url,
            OPENAI_API_KEY="test",
        )
    assert proc.returncode == 0, proc.stdout
    hist = cli("history", "t1", "--db", str(db), COLUMNS="80")
    assert hist.returncode == 0
    graph = build_graph(checkpointer=sqlite_checkpointer(db))
    ids = [
        s.config["configurable"]["checkpoint_id"]
        for s in graph.get_state_history({"configurable": {"thread_id": "t1"}})
    ]
    shown = re.findall(r"[│|]\s+\d+\s+[│|]\s+([0-9a-f-]{8,})\s+[│|]", hist.stdout)
    assert len(shown) == len(ids), hist.stdout
    for prefix in shown:
        assert len([i for i in ids if i.startswith(prefix)]) == 1  # each can be typed back
    back = cli("rollback", "t1", shown[3], "--db", str(db))
    assert back.returncode == 0, back.stdout + back.stderr
    assert "Workspace files are not restored" in back.stdout
    assert f"planmode resume t1 --db {db}" in back.stdout


# -- 11.10: what is happening, live on a terminal, plain lines with NO_COLOR --------------------------------------


@pytest.mark.parametrize("no_color", [False, True])
def test_a_slow_planner_shows_what_is_happening(tmp_path: Path, no_color: bool) -> None:
    from planmode.testing.openai_server import Fault

    base = responder()

    def slow_plan(body: dict[str, Any]) -> Any:
        answer = base(body)
        return Fault(delay=2.5, then=answer) if _purpose(body) == "plan" else answer

    extra = {"NO_COLOR": "1"} if no_color else {}
    with ScriptedOpenAIServer(slow_plan) as srv:
        child = spawn(
            [
                "run",
                "Write notes.md, then read it back",
                "--workspace",
                str(tmp_path),
                "--db",
                str(tmp_path / "r.sqlite"),
                "--mode",
                "plan",
                "--auto-approve",
                "--base-url",
                srv.base_url,
            ],
            OPENAI_API_KEY="test",
            **extra,
        )
        if no_color:
            child.expect(r"\.\.\. planning")  # a plain line, once
        else:
            child.expect(r"planning(\x1b\[[0-9;]*m|\s)*[123]s")  # the live line counts the seconds
        child.expect(pexpect.EOF)
        out = flat(child.before or "")
        child.close()
    assert child.exitstatus == 0, out
    assert "run finished: completed" in out


# -- 11.11: a second Ctrl-C does not wait -------------------------------------------------------------------------


def test_a_second_ctrl_c_stops_at_once_and_the_run_stays_resumable(tmp_path: Path) -> None:
    import time

    from planmode.testing.openai_server import Fault

    base = responder()

    def slow_execute(body: dict[str, Any]) -> Any:
        answer = base(body)
        return Fault(delay=30.0, then=answer) if _purpose(body) == "execute" else answer

    db = tmp_path / "r.sqlite"
    with ScriptedOpenAIServer(slow_execute) as srv:
        child = spawn(
            [
                "run",
                "Write notes.md, then read it back",
                "--workspace",
                str(tmp_path),
                "--db",
                str(db),
                "--thread",
                "t9",
                "--mode",
                "plan",
                "--auto-approve",
                "--base-url",
                srv.base_url,
            ],
            OPENAI_API_KEY="test",
        )
        child.expect(r"step started: .{0,16}draft")
        time.sleep(0.5)
        pressed = time.monotonic()
        child.sendintr()
        child.expect("Stopping")
        child.sendintr()
        child.expect(pexpect.EOF)
        waited = time.monotonic() - pressed
        out = flat(child.before or "")
        child.close()
    assert child.exitstatus == 130, out
    assert waited < 10 and "Traceback" not in out
    assert f"planmode resume t9 --db {db}" in out.replace("\n", "")
    shown = cli("show", "t9", "--db", str(db))
    # readable, resumable, and said so (issue 23 item 6: it is not "running" any more)
    assert shown.returncode == 0 and "state: interrupted" in shown.stdout and "planmode resume t9" in shown.stdout
