"""The agent cannot destroy the history it is recorded in: through the real ``planmode run`` (a subprocess, the
real ChatOpenAI client against the scripted OpenAI-compatible server, a real SQLite file inside the workspace),
the workspace tools refuse the database in use, its -wal and -shm files and ``.planmode/``, whatever ``--db``."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from planmode.testing.openai_server import ScriptedOpenAIServer

pytestmark = pytest.mark.integration

PLANMODE = [sys.executable, "-m", "planmode.cli"]
PLAN = {
    "title": "Wipe",
    # issue 24: a write step carries acceptance, and is done only when it wrote something (done.txt, below)
    "steps": [
        {
            "id": "wipe",
            # two files named: its write of done.txt does not end it, so the turn after the calls sees their results
            "description": "Overwrite the run history, then write done.txt or notes.txt",
            "tools": ["write_file", "edit_file"],
            "acceptance": "done.txt exists",
        }
    ],
}


def _purpose(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    text = first["content"] if isinstance(first["content"], str) else json.dumps(first["content"])
    return text.split("\n", 1)[0].removeprefix("planmode:") if text.startswith("planmode:") else "unknown"


def _responder(targets: list[str], tool_results: list[str]) -> Any:
    def respond(body: dict[str, Any]) -> Any:
        purpose = _purpose(body)
        if purpose == "plan":
            return json.dumps(PLAN)
        if purpose == "execute":
            results = [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]
            if not results:
                calls = []
                for target in targets:
                    calls += [
                        {"name": "write_file", "arguments": {"path": target, "content": "gone"}},
                        {"name": "read_file", "arguments": {"path": target}},
                        {
                            "name": "edit_file",
                            "arguments": {"path": target, "old_string": "SQLite", "new_string": "gone"},
                        },
                    ]
                calls.append({"name": "write_file", "arguments": {"path": "done.txt", "content": "tried"}})
                calls.append({"name": "list_files", "arguments": {"path": ".", "recursive": True}})
                return {"tool_calls": calls}
            tool_results.extend(results)
            return "tried"
        if purpose == "verify":
            return json.dumps({"passed": True, "reason": ""})
        if purpose == "explore":
            return "nothing to see"
        return "All done."

    return respond


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PLANMODE_"))}
    env.update(LANGSMITH_TRACING="false", COLUMNS="160", OPENAI_API_KEY="test")
    return env


@pytest.mark.parametrize("db_option", [None, "history.sqlite", "nested/dir/runs.db"])
def test_the_agent_cannot_touch_the_run_database_through_the_cli(tmp_path: Path, db_option: str | None) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    db = ws / (db_option or ".planmode/planmode.sqlite")
    names = [
        str(db.relative_to(ws)),
        f"{db.relative_to(ws)}-wal",
        f"{db.relative_to(ws)}-shm",
        ".planmode/planmode.sqlite",
        ".planmode/other.txt",
    ]
    tool_results: list[str] = []
    db_args = ["--db", db_option] if db_option else []
    with ScriptedOpenAIServer(_responder(names, tool_results)) as srv:
        proc = subprocess.run(
            [
                *PLANMODE,
                "run",
                "Wipe the history",
                "--workspace",
                ".",
                *db_args,
                "--thread",
                "t",
                "--auto-approve",
                "--mode",
                "plan",
                "--base-url",
                srv.base_url,
            ],
            cwd=ws,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr

    # Every access to the database, its companions or .planmode/ came back refused; nothing was written.
    *accesses, written, listing = tool_results  # in the order of the calls; the write of done.txt, the listing last
    assert not written.startswith("refused"), written
    assert len(accesses) == 3 * len(names)
    assert all(r.startswith("refused") and "planmode's own data" in r for r in accesses), accesses
    assert all(
        line.endswith("(planmode's data; not accessible)")
        for line in listing.splitlines()
        if db.name in line or ".planmode" in line
    ), listing
    assert not (ws / ".planmode" / "other.txt").exists()

    # The history is intact: a valid SQLite file holding the run, and the CLI reads it back.
    with sqlite3.connect(db) as conn:
        (count,) = conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = 't'").fetchone()
    assert count > 3
    show = subprocess.run(
        [*PLANMODE, "show", "t", *db_args], cwd=ws, env=_env(), capture_output=True, text=True, timeout=60
    )
    assert show.returncode == 0 and "completed" in show.stdout, show.stdout + show.stderr
