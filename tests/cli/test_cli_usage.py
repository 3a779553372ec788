"""What users look for (issue 45 item 8): ``planmode resume`` with no thread resumes the latest unfinished run of
this workspace; the usage line names arguments as ``TASK``, not ``{task}``."""

from __future__ import annotations

from pathlib import Path

import pytest

from planmode.testing.openai_server import ScriptedOpenAIServer
from tests.cli.test_cli import _responder
from tests.cli.test_cli_daily import cli

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        (["run"], "run [OPTIONS] TASK"),
        (["show"], "show [OPTIONS] THREAD"),
        (["rollback"], "rollback [OPTIONS] THREAD SNAPSHOT"),
        (["diff"], "diff [OPTIONS] THREAD [STEP]"),
    ],
)
def test_the_usage_line_names_arguments_in_capitals_without_braces(
    tmp_path: Path, command: list[str], usage: str
) -> None:
    proc = cli(*command, cwd=tmp_path)
    assert proc.returncode == 2
    assert usage in proc.stderr and "{" not in proc.stderr, proc.stderr
    assert f"Missing argument '{usage.split()[2]}'" in proc.stderr


def _waiting_run(tmp_path: Path, base_url: str, ws: Path, thread: str, db: Path) -> None:
    """A run left waiting for approval (no terminal to ask at: exit 3)."""
    ws.mkdir(exist_ok=True)
    proc = cli(
        "run", "Write notes.md with a heading, then read it back", "--workspace", str(ws), "--db", str(db),
        "--thread", thread, "--mode", "plan", "--base-url", base_url, cwd=tmp_path, OPENAI_API_KEY="test",
    )  # fmt: skip
    assert proc.returncode == 3, proc.stdout + proc.stderr


def test_resume_without_a_thread_continues_the_latest_unfinished_run_of_this_workspace(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    a, b = tmp_path / "a", tmp_path / "b"
    with ScriptedOpenAIServer(_responder({})) as srv:
        _waiting_run(tmp_path, srv.base_url, a, "old-a", db)
        _waiting_run(tmp_path, srv.base_url, a, "new-a", db)
        _waiting_run(tmp_path, srv.base_url, b, "in-b", db)  # the newest, in another workspace
        (a / "sub").mkdir()
        proc = cli("resume", "--db", str(db), "--auto-approve", cwd=a / "sub", OPENAI_API_KEY="test")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "latest unfinished run of this workspace: new-a" in proc.stdout
        assert (a / "notes.md").read_text() == "# Notes\n" and not (b / "notes.md").exists()
        again = cli("resume", "--db", str(db), "--auto-approve", cwd=a, OPENAI_API_KEY="test")
        assert again.returncode == 0 and "workspace: old-a" in again.stdout  # new-a is finished now
    nothing = cli("resume", "--db", str(db), cwd=tmp_path)
    assert nothing.returncode == 2 and "no unfinished run of this workspace" in nothing.stderr
    assert "Traceback" not in nothing.stderr


@pytest.mark.parametrize(("mode", "said"), [("plan", False), ("auto", True)])
def test_deciding_whether_the_task_needs_a_plan_is_said_only_when_it_is_decided(
    tmp_path: Path, mode: str, said: bool
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with ScriptedOpenAIServer(_responder({})) as srv:
        proc = cli(
            "run", "Write notes.md with a heading, then read it back", "--workspace", str(ws),
            "--db", str(tmp_path / "r.sqlite"), "--mode", mode, "--auto-approve", "--base-url", srv.base_url,
            OPENAI_API_KEY="test",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("deciding whether the task needs a plan" in proc.stdout) is said


def test_a_planner_failure_says_its_error_once_with_what_to_try(tmp_path: Path) -> None:
    from tests.cli.test_cli import _purpose

    ws = tmp_path / "ws"
    ws.mkdir()
    with ScriptedOpenAIServer(lambda body: "I cannot plan this." if _purpose(body) == "plan" else "x") as srv:
        proc = cli(
            "run", "do the thing", "--workspace", str(ws), "--db", str(tmp_path / "r.sqlite"), "--mode", "plan",
            "--auto-approve", "--base-url", srv.base_url, OPENAI_API_KEY="test",
        )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.count("no JSON object found in the model output") == 1, proc.stdout
    assert "Try: a more capable model (--model)" in proc.stdout


def test_run_json_writes_only_json_lines_to_stdout_the_last_one_the_result(tmp_path: Path) -> None:
    import json

    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "r.sqlite"
    task = "Write notes.md with a heading, then read it back"
    with ScriptedOpenAIServer(_responder({})) as srv:
        done = cli(
            "run", task, "--json", "--workspace", str(ws), "--db", str(db), "--mode", "plan", "--auto-approve",
            "--base-url", srv.base_url, OPENAI_API_KEY="test",
        )  # fmt: skip
        waiting = cli(
            "run", task, "--json", "--workspace", str(ws), "--db", str(db), "--thread", "w1", "--mode", "plan",
            "--base-url", srv.base_url, OPENAI_API_KEY="test",
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]  # every line is JSON
    kinds = [r["type"] for r in records]
    for kind in ("plan_created", "plan_approved", "step_started", "step_completed", "run_finished"):
        assert kind in kinds
    assert records[-1]["type"] == "result" and records[-1]["status"] == "completed"
    assert records[-1]["exit_code"] == 0 and records[-1]["resume"] is None
    assert "notes.md" in " ".join(records[-1]["files_changed"])
    assert "thread " in done.stderr  # the screens go to stderr
    assert waiting.returncode == 3, waiting.stdout + waiting.stderr
    last = json.loads(waiting.stdout.splitlines()[-1])
    assert last["status"] == "awaiting_approval" and last["exit_code"] == 3
    assert last["resume"].startswith("planmode resume w1 --db ")


def test_history_reads_at_80_columns_and_is_100_wide_when_piped(tmp_path: Path) -> None:
    import json
    import re

    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "r.sqlite"
    with ScriptedOpenAIServer(_responder({})) as srv:
        proc = cli(
            "run", "Write notes.md with a heading, then read it back", "--workspace", str(ws), "--db", str(db),
            "--thread", "h1", "--mode", "plan", "--auto-approve", "--base-url", srv.base_url, OPENAI_API_KEY="test",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    narrow = cli("history", "h1", "--db", str(db), COLUMNS="80").stdout
    lines = narrow.splitlines()
    assert lines and max(len(line) for line in lines) <= 80
    assert " UTC" not in "".join(lines[1:])  # short times; the day is said once, in the title
    rows = [line for line in lines if re.match(r"^│\s+\d+ │", line)]
    assert rows and all(re.search(r"│ \d\d:\d\d:\d\d │", row) for row in rows)
    assert "run started" in narrow and "task received:" in narrow  # words are not broken across lines
    for snap in json.loads(cli("history", "h1", "--db", str(db), "--json").stdout)["snapshots"]:
        assert snap["prefix"] in narrow  # each checkpoint prefix whole: it can be typed back
    import subprocess

    from tests.cli.test_cli import PLANMODE
    from tests.cli.test_cli_daily import env

    no_columns = {k: v for k, v in env().items() if k != "COLUMNS"}
    piped = subprocess.run(
        [*PLANMODE, "history", "h1", "--db", str(db)], env=no_columns, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, check=False,
    ).stdout.splitlines()  # fmt: skip
    assert max(len(line) for line in piped) == 100  # no terminal anywhere: 100 columns, not one line per row
