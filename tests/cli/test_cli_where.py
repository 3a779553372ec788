"""Runs are stored where the work is (issue 45 item 3): ``planmode run --workspace B`` started in folder A stores the
run in B's ``.planmode/``; ``ls``, ``show``, ``history`` and ``resume`` find it from B and from A (A remembers, per
user, where the runs started in it went), and nothing is created in A."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from planmode.testing.openai_server import ScriptedOpenAIServer
from tests.cli.test_cli import PLANMODE, _env, _responder


def _planmode(*args: str, cwd: Path, state: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PLANMODE, *args],
        cwd=cwd,
        env=_env(XDG_STATE_HOME=str(state), **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_run_lives_in_its_workspace_and_is_found_from_where_it_started(tmp_path: Path) -> None:
    a, b, c, state = tmp_path / "a", tmp_path / "b", tmp_path / "c", tmp_path / "state"
    for folder in (a, b, c):
        folder.mkdir()
    seen: dict[str, int] = {}
    with ScriptedOpenAIServer(_responder(seen)) as srv:
        common = ("--mode", "plan", "--base-url", srv.base_url)
        first = _planmode(
            "run", "Write notes.md", "--thread", "t-b", "--workspace", str(b), *common,
            cwd=a, state=state, OPENAI_API_KEY="test",
        )  # fmt: skip
        assert first.returncode == 3, first.stdout + first.stderr  # waits for approval (not a terminal)
        assert (b / ".planmode" / "planmode.sqlite").is_file()
        assert not (a / ".planmode").exists(), "the run was stored where the command ran"

        # From the workspace: the workspace's database.
        in_b = _planmode("ls", cwd=b, state=state)
        assert in_b.returncode == 0 and "t-b" in in_b.stdout, in_b.stdout + in_b.stderr
        # From the folder it was started in: found too, and ls says where the runs are.
        in_a = _planmode("ls", cwd=a, state=state)
        assert in_a.returncode == 0, in_a.stdout + in_a.stderr
        assert "t-b" in in_a.stdout and str(b / ".planmode") in in_a.stdout.replace("\n", "")
        for verb in ("show", "history"):
            got = _planmode(verb, "t-b", cwd=a, state=state)
            assert got.returncode == 0, (verb, got.stdout + got.stderr)

        # A second run from A into another workspace: ls in A lists both databases, each thread once.
        second = _planmode(
            "run", "Write notes.md", "--thread", "t-c", "--workspace", str(c), *common,
            cwd=a, state=state, OPENAI_API_KEY="test",
        )  # fmt: skip
        assert second.returncode == 3, second.stdout + second.stderr
        listed = json.loads(_planmode("ls", "--json", cwd=a, state=state).stdout)
        assert sorted(r["thread_id"] for r in listed["runs"]) == ["t-b", "t-c"]
        assert {r["database"] for r in listed["runs"]} == {
            str(b / ".planmode" / "planmode.sqlite"),
            str(c / ".planmode" / "planmode.sqlite"),
        }
        # The older run is resumed from A without --db: its own database, its own workspace.
        resumed = _planmode("resume", "t-b", "--auto-approve", cwd=a, state=state, OPENAI_API_KEY="test")
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (b / "notes.md").read_text() == "# Notes\n"
    assert not (a / ".planmode").exists() and not (a / "notes.md").exists()

    # An unrelated folder finds nothing and says where runs are stored, in one line.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    nothing = _planmode("ls", cwd=elsewhere, state=state)
    assert nothing.returncode == 2
    assert "stored in its workspace's .planmode/" in " ".join(nothing.stderr.split()), nothing.stderr


def test_a_damaged_record_of_started_runs_loses_nothing_else(tmp_path: Path) -> None:
    """A record file with junk lines (a hostile or truncated write) is read for the lines that are records, and a
    record of a file that is not a planmode database is not followed."""
    import os

    from planmode.cli.common import remember_start, started_here

    a, b, state = tmp_path / "a", tmp_path / "b", tmp_path / "state"
    a.mkdir()
    (b / ".planmode").mkdir(parents=True)
    db = b / ".planmode" / "planmode.sqlite"
    with sqlite3.connect(db) as conn:  # the tables of a planmode database
        conn.execute("CREATE TABLE checkpoints (thread_id TEXT)")
        conn.execute("CREATE TABLE writes (thread_id TEXT)")
    conn.close()
    other = tmp_path / "someone-elses.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    (state / "planmode").mkdir(parents=True)
    junk = ["not json", '{"folder": 3}', "[]", "", json.dumps({"folder": str(a), "db": str(other)})]
    (state / "planmode" / "started.jsonl").write_text("\n".join(junk) + "\n")
    old_env, old_cwd = os.environ.get("XDG_STATE_HOME"), Path.cwd()
    os.environ["XDG_STATE_HOME"] = str(state)
    try:
        os.chdir(a)
        remember_start(str(db))
        assert started_here() == [str(db)]
        os.chdir(b)  # the workspace itself finds it upward: nothing to remember there
        remember_start(str(db))
        assert started_here() == []
    finally:
        os.chdir(old_cwd)
        if old_env is None:
            os.environ.pop("XDG_STATE_HOME")
        else:
            os.environ["XDG_STATE_HOME"] = old_env
