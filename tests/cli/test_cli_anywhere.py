"""Runs found from any folder (issue 23 item 3): the default database is the nearest ``.planmode/`` upward, as git
finds ``.git``; the resume hint works from any folder; ``.planmode/`` ignores itself for git."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from planmode.cli.app import find_default_db
from planmode.testing.openai_server import ScriptedOpenAIServer
from tests.cli.test_cli import PLANMODE, _env, _responder


def _planmode(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PLANMODE, *args], cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=120, check=False
    )


def test_find_default_db_looks_upward(tmp_path: Path) -> None:
    project = tmp_path / "project"
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    assert find_default_db(deep) != project / ".planmode" / "planmode.sqlite"
    (project / ".planmode").mkdir()
    assert find_default_db(deep) == project / ".planmode" / "planmode.sqlite"
    assert find_default_db(project) == project / ".planmode" / "planmode.sqlite"
    (deep / ".planmode").mkdir()  # the nearest one wins, as the nearest .git does
    assert find_default_db(deep) == deep / ".planmode" / "planmode.sqlite"


def test_a_run_is_found_from_a_subfolder_and_resumed_from_anywhere(tmp_path: Path) -> None:
    project = tmp_path / "project"
    sub = project / "docs" / "notes"
    sub.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert find_default_db(tmp_path) is None, "a .planmode/ folder above the test's temporary folder"
    seen: dict[str, int] = {}
    with ScriptedOpenAIServer(_responder(seen)) as srv:
        # No --db, no PLANMODE_DB, not a terminal: the plan waits for approval (exit 3) with the resume hint.
        first = _planmode(
            "run", "Write notes.md", "--thread", "todo1", "--mode", "plan", "--base-url", srv.base_url,
            cwd=project, OPENAI_API_KEY="test",
        )  # fmt: skip
        assert first.returncode == 3, first.stdout + first.stderr
        db = project / ".planmode" / "planmode.sqlite"
        assert db.is_file()
        # .planmode/ ignores itself, as a venv does: the runs' database is never committed by accident.
        ignore = (project / ".planmode" / ".gitignore").read_text()
        assert "*" in ignore.splitlines()
        hint = re.search(r"planmode resume todo1[^\n]*", first.stdout)
        assert hint is not None, first.stdout
        assert f"--db {db}" in hint.group(0)

        # From a subfolder, with no --db: the database upward.
        listed = _planmode("ls", cwd=sub)
        assert listed.returncode == 0, listed.stdout + listed.stderr
        assert "todo1" in listed.stdout and "awaiting" in listed.stdout
        shown = _planmode("show", "todo1", cwd=sub)
        assert shown.returncode == 0, shown.stdout + shown.stderr

        # From an unrelated folder: the printed hint as it is, and the run finishes there.
        resumed = _planmode(*shlex.split(hint.group(0))[1:], "--auto-approve", cwd=elsewhere, OPENAI_API_KEY="test")
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert not (elsewhere / ".planmode").exists()  # nothing was created where the hint was run
    assert (project / "notes.md").read_text() == "# Notes\n"  # in the run's own workspace
