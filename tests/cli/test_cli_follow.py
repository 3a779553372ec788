"""Following a running run from another process (issue 45, item 8): ``planmode watch`` / ``show --follow`` print
each new snapshot as the run writes it, end with the run, never write to it, and Ctrl-C ends them cleanly."""

from __future__ import annotations

import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pexpect
import pytest

from planmode.testing.openai_server import Fault, ScriptedOpenAIServer
from tests.cli.test_cli_daily import PLANMODE, _purpose, cli, env, flat, responder, spawn

pytestmark = pytest.mark.integration

SRC = str(Path(__file__).resolve().parents[2] / "src")  # this checkout's code, whatever the folder it runs in


def _slow(delay: float) -> Any:
    base = responder()

    def respond(body: dict[str, Any]) -> Any:
        answer = base(body)
        return Fault(delay=delay, then=answer) if _purpose(body) == "execute" else answer

    return respond


def _start(db: Path, ws: Path, url: str) -> subprocess.Popen[str]:
    args = ["run", "Write notes.md, then read it back", "--workspace", str(ws), "--db", str(db), "--thread", "t1"]
    return subprocess.Popen(
        [*PLANMODE, *args, "--mode", "plan", "--auto-approve", "--base-url", url],
        env=env(OPENAI_API_KEY="test"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def _rows(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
        return (
            conn.execute("SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints ORDER BY 3").fetchall()
            + conn.execute("SELECT thread_id, checkpoint_id, task_id, idx FROM writes ORDER BY 2, 3, 4").fetchall()
        )


def _wait_for_steps(db: Path, runner: subprocess.Popen[str]) -> None:
    """Until the run has a checkpoint of its plan (the follower then starts mid-run)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert runner.poll() is None, runner.communicate()
        if db.exists():
            try:
                with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
                    if conn.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = 't1'").fetchone()[0] >= 5:
                        return
            except sqlite3.OperationalError:  # created a moment ago: its tables are not there yet
                pass
        time.sleep(0.1)
    raise AssertionError("the run did not start")


@pytest.mark.parametrize("command", [["watch"], ["show", "t1", "--follow"]])
def test_a_follower_sees_the_steps_finish_and_ends_with_the_run(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(_slow(6.0)) as srv:
        runner = _start(db, tmp_path, srv.base_url)
        _wait_for_steps(db, runner)
        if command == ["watch"]:  # `show` on a running run says how to follow it
            shown = cli("show", "t1", "--db", str(db))
            assert f"watch it with: planmode watch t1 --db {db}" in shown.stdout.replace("\n", ""), shown.stdout
        # from the workspace, `watch` with no thread follows its running run
        follower = subprocess.run(
            [*PLANMODE, *command, "--db", str(db)],
            env=env(PYTHONPATH=SRC),
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
        )
        out, err = runner.communicate(timeout=120)
    assert runner.returncode == 0, out + err
    assert follower.returncode == 0, follower.stdout + follower.stderr
    lines = follower.stdout.splitlines()
    assert lines[0].startswith("following t1")
    shown = [line for line in lines if line.startswith("#")]
    assert len(shown) >= 4, follower.stdout  # it printed snapshots as they landed, not only the last one
    text = "\n".join(shown)
    assert "step draft done" in text and "step check done" in text and shown[-1].endswith("finished: completed")
    assert text.index("step draft done") < text.index("step check done")
    assert lines[-1] == "state: completed"


def test_following_writes_nothing_and_a_finished_run_ends_at_once(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(responder()) as srv:
        runner = _start(db, tmp_path, srv.base_url)
        runner.communicate(timeout=120)
    assert runner.returncode == 0
    before = _rows(db)
    started = time.monotonic()
    follower = cli("watch", "t1", "--db", str(db))
    assert follower.returncode == 0 and follower.stdout.splitlines()[-1] == "state: completed"
    assert time.monotonic() - started < 30
    assert _rows(db) == before
    missing = cli("watch", "nope", "--db", str(db))
    assert missing.returncode == 2 and "no run with thread id 'nope'" in missing.stderr


def test_ctrl_c_stops_following_cleanly_and_the_run_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    with ScriptedOpenAIServer(_slow(8.0)) as srv:
        runner = _start(db, tmp_path, srv.base_url)
        _wait_for_steps(db, runner)
        child = spawn(["watch", "t1", "--db", str(db)])
        child.expect("following t1")
        child.expect(r"#\d+ ")
        time.sleep(0.5)
        child.sendintr()
        child.expect(pexpect.EOF)
        shown = flat(child.before or "")
        child.close()
        assert runner.poll() is None  # the run is not affected
        out, err = runner.communicate(timeout=120)
    assert child.exitstatus == 130, shown
    assert "Traceback" not in shown and "Stopped following; the run is not affected." in shown
    assert "planmode resume" not in shown  # nothing to resume: the follower stopped, not the run
    assert runner.returncode == 0, out + err
