"""Bad input is refused before anything is stored (issue 23 item 8): a --base-url that is not an http(s) URL and an
empty task are one line on stderr and exit 2, with no database made; ``-`` reads the task from stdin."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from planmode.testing.openai_server import ScriptedOpenAIServer
from tests.cli.test_cli import PLANMODE, _env, _responder


def _cli(*args: str, cwd: Path, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PLANMODE, *args], cwd=cwd, input=stdin, env=_env(**env), capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


@pytest.mark.parametrize("url", ["not a url", "ftp://example.com/v1", "http://", "localhost:8080/v1", "http://[::1"])
def test_a_base_url_that_is_not_http_is_refused_before_anything_is_stored(tmp_path: Path, url: str) -> None:
    db = tmp_path / "runs.sqlite"
    proc = _cli("run", "a task", "--db", str(db), "--base-url", url, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "not an http(s) URL" in proc.stderr and proc.stdout == ""
    assert list(tmp_path.iterdir()) == []  # no database, no .planmode/
    via_env = _cli("run", "a task", "--db", str(db), cwd=tmp_path, OPENAI_BASE_URL=url)
    assert via_env.returncode == 2 and "OPENAI_BASE_URL" in via_env.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("task", ["", "   \n\t"])
def test_an_empty_task_is_refused(tmp_path: Path, task: str) -> None:
    proc = _cli("run", task, "--db", str(tmp_path / "r.sqlite"), cwd=tmp_path, OPENAI_API_KEY="k")
    assert proc.returncode == 2 and "the task is empty" in proc.stderr, proc.stdout + proc.stderr
    from_stdin = _cli("run", "-", "--db", str(tmp_path / "r.sqlite"), cwd=tmp_path, stdin=task, OPENAI_API_KEY="k")
    assert from_stdin.returncode == 2 and "the task is empty" in from_stdin.stderr
    assert list(tmp_path.iterdir()) == []


def test_dash_reads_the_task_from_stdin(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "r.sqlite"
    task = "Write notes.md with a heading,\nthen read it back"
    with ScriptedOpenAIServer(_responder({})) as srv:
        proc = _cli(
            "run", "-", "--workspace", str(ws), "--db", str(db), "--thread", "t1", "--mode", "plan", "--auto-approve",
            "--base-url", srv.base_url, cwd=tmp_path, stdin=task, OPENAI_API_KEY="test",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (ws / "notes.md").read_text() == "# Notes\n"
    listed = _cli("ls", "--db", str(db), cwd=tmp_path)
    assert "Write notes.md with a heading," in listed.stdout  # the goal is the text read from stdin, not "-"


def test_resume_refuses_a_bad_base_url(tmp_path: Path) -> None:
    proc = _cli("resume", "t1", "--db", str(tmp_path / "r.sqlite"), "--base-url", "ftp://x", cwd=tmp_path)
    assert proc.returncode == 2 and "not an http(s) URL" in proc.stderr
