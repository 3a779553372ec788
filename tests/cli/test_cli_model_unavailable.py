"""Through the CLI: a local server that dies mid-run leaves the run paused (exit 5, status
model_unavailable, no traceback); once a server listens again, `planmode resume` finishes the run without
re-running the done step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from planmode.testing.openai_server import Fault, ScriptedOpenAIServer

pytestmark = pytest.mark.integration

PLANMODE = [sys.executable, "-m", "planmode.cli"]
PLAN = {
    "title": "Two steps",
    "steps": [
        {"id": "first", "description": "say one"},
        {"id": "second", "description": "say two", "dependencies": ["first"]},
    ],
}


def purpose(body: dict[str, Any]) -> str:
    first = str(body["messages"][0].get("content") or "")
    return first.split("\n", 1)[0].removeprefix("planmode:") if first.startswith("planmode:") else "unknown"


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PLANMODE_"))}
    out.update(LANGSMITH_TRACING="false", COLUMNS="160", TERM="xterm", OPENAI_API_KEY="test")
    return out


class Script:
    def __init__(self, die_at: str | None = None) -> None:
        self.die_at = die_at
        self.server: ScriptedOpenAIServer | None = None
        self.executed: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Any:
        p = purpose(body)
        if p == "plan":
            value = PLAN
            if body.get("tool_choice") and body.get("tools"):
                return {"tool_calls": [{"name": body["tools"][0]["function"]["name"], "arguments": value}]}
            return json.dumps(value)
        if p == "execute":
            step = "second" if "Step `second`" in json.dumps(body["messages"]) else "first"
            self.executed.append(step)
            if step == self.die_at and self.server is not None:
                threading.Thread(target=self.server.stop).start()
                return Fault(delay=30)
            return f"said {step}"
        return f"{p} done"


def test_cli_run_pauses_when_the_server_dies_and_resume_finishes(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    first = Script(die_at="second")
    srv = ScriptedOpenAIServer(first)
    first.server = srv
    srv.start()
    url = srv.base_url
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    try:
        proc = subprocess.run(
            [
                *PLANMODE,
                "run",
                "say one, then say two",
                "--db",
                str(db),
                "--workspace",
                str(tmp_path),
                "--auto-approve",
                "--mode",
                "plan",
                "--base-url",
                url,
                "--thread",
                "t1",
            ],
            env=env(),
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    finally:
        srv.stop()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 5, out
    assert "Traceback" not in out
    assert "Model unavailable" in out and "planmode resume t1" in out
    assert first.executed == ["first", "second"]

    show = subprocess.run(
        [*PLANMODE, "show", "t1", "--db", str(db)], env=env(), capture_output=True, text=True, timeout=60
    )
    assert "model_unavailable" in show.stdout

    second = Script()
    with ScriptedOpenAIServer(second, port=port) as again:  # the server is back, on the same port
        proc = subprocess.run(
            [*PLANMODE, "resume", "t1", "--db", str(db), "--workspace", str(tmp_path), "--auto-approve"],
            env=env(),
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert again.base_url == url
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert second.executed == ["second"]  # the done step did not run again
