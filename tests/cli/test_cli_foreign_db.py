"""A command pointed at a file that is not a planmode database changes nothing in it (issue 23 item 5): "not a
planmode database", exit 2; no table added, no journal mode switched, no -wal/-shm file left beside it."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planmode.cli.app import app
from planmode.persistence import sqlite_checkpointer


def _folder(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.iterdir())}


def _foreign(tmp_path: Path, kind: str) -> Path:
    db = tmp_path / "theirs" / "app.sqlite"
    db.parent.mkdir()
    if kind == "sqlite":
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE people (name TEXT)")
        conn.execute("INSERT INTO people VALUES ('ada')")
        conn.commit()
        conn.close()
    elif kind == "empty":
        db.write_bytes(b"")
    else:
        db.write_text("name,age\nada,36\n")
    return db


COMMANDS = [["ls"], ["show", "t1"], ["history", "t1"], ["resume", "t1"], ["rollback", "t1", "1"]]


@pytest.mark.parametrize("kind", ["sqlite", "empty", "text"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_command_on_a_foreign_file_changes_nothing(tmp_path: Path, kind: str, command: list[str]) -> None:
    db = _foreign(tmp_path, kind)
    before = _folder(db.parent)
    result = CliRunner().invoke(app, [*command, "--db", str(db)], env={"COLUMNS": "200", "PLANMODE_DB": None})
    assert result.exit_code == 2, result.output
    assert "not a planmode database" in result.output
    assert _folder(db.parent) == before  # the same files, byte for byte
    if kind == "sqlite":
        conn = sqlite3.connect(db)
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        conn.close()
        assert tables == ["people"] and mode == "delete"


def test_a_run_refuses_a_foreign_sqlite_file(tmp_path: Path) -> None:
    db = _foreign(tmp_path, "sqlite")
    before = _folder(db.parent)
    result = CliRunner().invoke(
        app, ["run", "a task", "--db", str(db), "--base-url", "http://127.0.0.1:9/v1"], env={"PLANMODE_DB": None}
    )
    assert result.exit_code == 2 and "not a planmode database" in result.output, result.output
    assert _folder(db.parent) == before


def test_a_planmode_database_is_still_read(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    sqlite_checkpointer(db).conn.close()
    result = CliRunner().invoke(app, ["ls", "--db", str(db)], env={"COLUMNS": "200", "PLANMODE_DB": None})
    assert result.exit_code == 0, result.output
    assert "no runs" in result.output
