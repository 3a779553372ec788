"""Through the CLI, against a real local HTTP server that answers 401/403 (a bad API key): the run pauses with
its own message naming the URL (exit 5, resumable), the refusal is never counted as an invalid plan or a failed
step, and once the key is accepted `planmode resume` finishes the run (issue 23, item 7)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
    out.update(LANGSMITH_TRACING="false", COLUMNS="200", TERM="xterm", OPENAI_API_KEY="sk-wrong")
    return out


class Script:
    """Answers like a model, except that it refuses the key (``status``) for the purposes in ``refuse``."""

    def __init__(self, status: int, refuse: set[str]) -> None:
        self.status = status
        self.refuse = refuse
        self.asked: list[str] = []
        self.executed: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Any:
        p = purpose(body)
        self.asked.append(p)
        if p == "execute":
            step = "second" if "Step `second`" in json.dumps(body["messages"]) else "first"
            p = f"execute:{step}"
        if p in self.refuse:
            message = "Incorrect API key provided: sk-wrong." if self.status == 401 else "no access to this model"
            return Fault(status=self.status, body={"error": {"message": message, "type": "invalid_request_error"}})
        if p == "plan":
            return json.dumps(PLAN)
        if p.startswith("execute:"):
            self.executed.append(p.split(":", 1)[1])
            return f"said {p.split(':', 1)[1]}"
        if p == "verify":
            return json.dumps({"passed": True, "reason": ""})
        return f"{p} done"


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PLANMODE, *args], env=env(), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_at_planning_pauses_with_its_own_message_and_resumes(tmp_path: Path, status: int) -> None:
    db = tmp_path / "runs.sqlite"
    script = Script(status, {"plan"})
    with ScriptedOpenAIServer(script) as srv:
        flags = ["--db", str(db), "--workspace", str(tmp_path), "--auto-approve"]
        proc = _run(["run", "say one, then say two", *flags, "--mode", "plan", "--base-url", srv.base_url])
        out = proc.stdout + proc.stderr
        assert proc.returncode == 5, out  # paused, resumable: not failed (1)
        assert "Traceback" not in out
        assert "Not authorised" in out and srv.base_url in out and f"HTTP {status}" in out
        assert "* not authorised: " in out and "model unavailable" not in out  # the progress line says it too
        assert "OPENAI_API_KEY" in out
        assert "no valid plan" not in out and "failed" not in out
        assert script.asked.count("plan") == 1  # not retried as an invalid plan
        thread = out.split("thread ", 1)[1].split(" ", 1)[0]
        assert f"planmode resume {thread}" in out

        script.refuse = set()  # the key is fixed
        proc = _run(["resume", thread, "--db", str(db)])
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        assert "completed" in out
        assert script.executed == ["first", "second"]


def test_a_refused_key_during_a_step_is_not_a_failed_attempt(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    script = Script(401, {"execute:second"})
    with ScriptedOpenAIServer(script) as srv:
        flags = ["--db", str(db), "--workspace", str(tmp_path), "--auto-approve", "--thread", "t1"]
        proc = _run(["run", "say one, then say two", *flags, "--mode", "plan", "--base-url", srv.base_url])
        out = proc.stdout + proc.stderr
        assert proc.returncode == 5, out
        assert "Not authorised" in out and srv.base_url in out
        assert "step failed" not in out and "reflect" not in out
        assert "planmode resume t1" in out

        script.refuse = set()
        proc = _run(["resume", "t1", "--db", str(db)])
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        assert script.executed == ["first", "second"]  # the done step did not run again
        assert "(attempt 2)" not in out  # the refused call was not counted as an attempt of the step
