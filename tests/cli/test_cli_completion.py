"""Shell completion (issue 45, item 8): typer's --show-completion prints a script for `planmode`, and the script's
protocol (``_PLANMODE_COMPLETE``) completes the commands and, for THREAD, the runs of the database, read-only."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_cli_daily import PLANMODE, env

pytestmark = pytest.mark.integration

SRC = str(Path(__file__).resolve().parents[2] / "src")  # this checkout's code, whatever the folder it runs in
COMMANDS = {"run", "resume", "show", "ls", "history", "rollback", "diff", "graph", "demo"}


def _complete(words: str, cword: int, cwd: Path, **extra: str) -> list[str]:
    proc = subprocess.run(
        PLANMODE,
        env=env(_PLANMODE_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD=str(cword), PYTHONPATH=SRC, **extra),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return proc.stdout.split()


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_the_script_of_each_shell_for_planmode(tmp_path: Path, shell: str) -> None:
    proc = subprocess.run(
        [*PLANMODE, "completion", shell],
        env=env(PYTHONPATH=SRC),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "_PLANMODE_COMPLETE" in proc.stdout and "planmode" in proc.stdout
    if shell == "bash":
        assert "_PLANMODE_COMPLETE=complete_bash" in proc.stdout
        assert proc.stdout.strip().splitlines()[-1] == "complete -o default -F _planmode_completion planmode"
    unknown = subprocess.run([*PLANMODE, "completion", "tcsh"], env=env(PYTHONPATH=SRC), capture_output=True, text=True)
    assert unknown.returncode == 2 and "tcsh" in unknown.stderr
    help_text = subprocess.run([*PLANMODE, "--help"], env=env(PYTHONPATH=SRC), capture_output=True, text=True).stdout
    assert "--install-completion" in help_text and "completion" in help_text


def test_completion_names_the_commands_and_the_threads_of_the_database(tmp_path: Path) -> None:
    assert set(_complete("planmode ", 1, tmp_path)) >= COMMANDS
    assert _complete("planmode hi", 1, tmp_path) == ["history"]
    db = tmp_path / "runs.sqlite"
    demo = subprocess.run(
        [*PLANMODE, "demo", "--db", str(db)], env=env(PYTHONPATH=SRC), capture_output=True, text=True, timeout=600
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    import sqlite3

    with sqlite3.connect(db) as conn:
        threads = {str(r[0]) for r in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    assert threads
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    for words, cword in (("planmode show ", 2), ("planmode history ", 2), ("planmode resume ", 2)):
        assert set(_complete(words, cword, tmp_path, PLANMODE_DB=str(db))) == threads, words
    assert set(_complete(f"planmode rollback --db {db} ", 4, tmp_path)) == threads
    one = sorted(threads)[0]
    assert one in _complete(f"planmode show {one[:3]}", 2, tmp_path, PLANMODE_DB=str(db))
    # a file that is not a database: nothing offered, nothing printed, nothing written
    other = tmp_path / "notes.txt"
    other.write_text("not a database\n")
    assert _complete("planmode show ", 2, tmp_path, PLANMODE_DB=str(other)) == []
    assert other.read_text() == "not a database\n"
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
