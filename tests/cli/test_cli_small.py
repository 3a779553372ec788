"""Small things from a newcomer's walk (issue 23, item 15), for real: a subprocess or a pty, the scripted
OpenAI-compatible server over HTTP. A direct answer is printed once; after a resume the live line counts the
plan's steps (``step 2/2``, not ``step 1/?``); the demo says where its files are and how to explore them."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pexpect
import pytest

from planmode.testing.openai_server import Fault, ScriptedOpenAIServer
from tests.cli.test_cli_daily import cli, flat, responder, spawn

pytestmark = pytest.mark.integration

ANSWER = "The answer is forty-two, unique-marker-7731."


def test_a_direct_answer_is_printed_once_piped(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(responder(respond=ANSWER)) as srv:
        proc = cli(
            "run", "What is the answer?", "--workspace", str(tmp_path), "--db", str(tmp_path / "r.sqlite"),
            "--mode", "direct", "--base-url", srv.base_url, OPENAI_API_KEY="test",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("unique-marker-7731") == 1, proc.stdout
    assert "\nAnswer\n" in proc.stdout


def test_a_direct_answer_is_printed_once_at_a_terminal(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(responder(respond=ANSWER)) as srv:
        child = spawn(
            ["run", "What is the answer?", "--workspace", str(tmp_path), "--db", str(tmp_path / "r.sqlite"),
             "--mode", "direct", "--base-url", srv.base_url],
            OPENAI_API_KEY="test",
        )  # fmt: skip
        child.expect(pexpect.EOF)
        out = flat(child.before or "")
        child.close()
    assert child.exitstatus == 0, out
    assert out.count("unique-marker-7731") == 1, out


PLAN = {
    "title": "Two steps",
    "steps": [
        {"id": "first", "description": "say one"},
        {"id": "second", "description": "say two", "dependencies": ["first"]},
    ],
}


def _purpose(body: dict[str, Any]) -> str:
    first = str(body["messages"][0].get("content") or "")
    return first.split("\n", 1)[0].removeprefix("planmode:") if first.startswith("planmode:") else "unknown"


class PausingScript:
    """Plans two steps; the second step's model call refuses the key (the run pauses) while ``refuse`` is set,
    and answers slowly afterwards (the live line is drawn meanwhile)."""

    def __init__(self) -> None:
        self.refuse = True

    def __call__(self, body: dict[str, Any]) -> Any:
        p = _purpose(body)
        if p == "plan":
            return json.dumps(PLAN)
        if p == "execute":
            if "Step `second`" not in json.dumps(body["messages"]):
                return "said first"
            if self.refuse:
                return Fault(status=401, body={"error": {"message": "Incorrect API key provided"}})
            return Fault(delay=2.5, then="said second")
        if p == "verify":
            return json.dumps({"passed": True, "reason": ""})
        return f"{p} done"


def test_after_a_resume_the_live_line_counts_the_plans_steps(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    script = PausingScript()
    with ScriptedOpenAIServer(script) as srv:
        first = cli(
            "run", "say one, then say two", "--workspace", str(tmp_path), "--db", str(db), "--thread", "t1",
            "--mode", "plan", "--auto-approve", "--base-url", srv.base_url, OPENAI_API_KEY="test",
        )  # fmt: skip
        assert first.returncode == 5, first.stdout + first.stderr  # paused before the second step ran
        script.refuse = False
        child = spawn(["resume", "t1", "--db", str(db)], OPENAI_API_KEY="test")
        child.expect(pexpect.EOF)
        raw = child.before or ""
        child.close()
    out = flat(raw)
    assert child.exitstatus == 0, out
    assert re.search(r"executing step 2/2", out), out  # the live line, drawn while the second step runs
    assert "/?" not in out


def test_the_demo_says_where_its_files_are_and_how_to_explore_them(tmp_path: Path) -> None:
    proc = cli("demo", "--db", str(tmp_path / "d.sqlite"), timeout=300)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr
    found = re.search(r"The demo's files are kept in (\S+)", out)
    assert found, out[-2000:]
    kept = Path(found.group(1))
    try:
        assert (kept / "workspace" / "stats.py").is_file()  # the folder named is really there, with the files
        assert f"cd {kept / 'workspace'} && python test_stats.py" in out
        assert re.search(r"planmode show demo-\w+ --db " + re.escape(str(tmp_path / "d.sqlite")), out)
        assert f"rm -r {kept}" in out
    finally:
        shutil.rmtree(kept, ignore_errors=True)
