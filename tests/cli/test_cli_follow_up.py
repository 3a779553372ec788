"""``planmode run TASK --follow-up T`` remembers (issue 45 item 2), through the CLI and a real OpenAI-compatible
server: the follow-up's planner and executor requests carry T's task, steps and answer, and the plan shown for
approval says what it follows."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from planmode.testing.openai_server import ScriptedOpenAIServer
from tests.cli.test_cli import PLANMODE, _env, _purpose, _responder

FIRST = "Write notes.md"
FOLLOW = "Now add a date to it"


def _planmode(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PLANMODE, *args], cwd=cwd, env=_env(OPENAI_API_KEY="test"), capture_output=True, text=True, timeout=180,
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _text(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"])


def test_a_follow_up_carries_the_earlier_run_into_its_requests_and_its_approval(tmp_path: Path) -> None:
    seen: dict[str, int] = {}
    db = str(tmp_path / "runs.sqlite")
    with ScriptedOpenAIServer(_responder(seen)) as srv:
        common = ("--mode", "plan", "--base-url", srv.base_url, "--db", db, "--workspace", str(tmp_path))
        first = _planmode("run", FIRST, "--thread", "t1", "--auto-approve", *common, cwd=tmp_path)
        assert first.returncode == 0, first.stdout + first.stderr
        before = len(srv.requests)
        follow = _planmode("run", FOLLOW, "--follow-up", "t1", *common, cwd=tmp_path)  # not a terminal: waits
        assert follow.returncode == 3, follow.stdout + follow.stderr
        requests = srv.requests[before:]
    plans = [b for b in requests if _purpose(b) == "plan"]
    assert plans and all(FIRST in _text(b) and "draft (done)" in _text(b) for b in plans), plans
    assert "All done." in _text(plans[0])  # the earlier run's final answer
    screen = " ".join(follow.stdout.split())
    assert "Follows an earlier run" in screen and f"Task: {FIRST}" in screen, follow.stdout
