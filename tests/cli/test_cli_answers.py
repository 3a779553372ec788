"""The approval prompt accepts the words it lists and the usual yes (issue 23 item 13): ``approve``, ``a``, ``y``,
``yes`` in any case approve; Ctrl-D leaves the run for later with the resume command, no ``error: EOFError``.
A real pseudo-terminal and the scripted OpenAI-compatible server."""

from __future__ import annotations

import re
from pathlib import Path

import pexpect
import pytest

from planmode.testing.openai_server import ScriptedOpenAIServer
from tests.cli.test_cli import PLANMODE, _env, _responder

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _spawn(srv: ScriptedOpenAIServer, tmp_path: Path) -> pexpect.spawn:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    args = [
        "run", "Write notes.md with a heading, then read it back", "--workspace", str(ws), "--db",
        str(tmp_path / "r.sqlite"), "--thread", "t1", "--mode", "plan", "--base-url", srv.base_url,
        "--model", "scripted",
    ]  # fmt: skip
    return pexpect.spawn(
        PLANMODE[0], [*PLANMODE[1:], *args], env=_env(OPENAI_API_KEY="test"), encoding="utf-8", timeout=60,
        dimensions=(40, 160),
    )  # fmt: skip


@pytest.mark.parametrize("word", ["approve", "Approve", "A", "y", "YES"])
def test_the_approval_accepts_the_words(tmp_path: Path, word: str) -> None:
    with ScriptedOpenAIServer(_responder({})) as srv:
        child = _spawn(srv, tmp_path)
        child.expect("Approve this plan")
        child.sendline(word)
        child.expect(pexpect.EOF)
        output = ANSI.sub("", child.before or "")
        child.close()
    assert child.exitstatus == 0, output
    assert "run finished" in output and "completed" in output
    assert (tmp_path / "ws" / "notes.md").read_text() == "# Notes\n"


def test_an_unknown_answer_asks_again_saying_what_is_accepted(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(_responder({})) as srv:
        child = _spawn(srv, tmp_path)
        child.expect("Approve this plan")
        child.sendline("maybe")
        child.expect("Please answer approve, edit, reject, cancel, quit")
        child.expect("Approve this plan")
        child.sendline("q")
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == 3  # left awaiting approval


def test_ctrl_d_leaves_with_the_resume_command(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(_responder({})) as srv:
        child = _spawn(srv, tmp_path)
        child.expect("Approve this plan")
        child.sendeof()
        child.expect(pexpect.EOF)
        output = ANSI.sub("", child.before or "")
        child.close()
    assert child.exitstatus == 3, output  # awaiting approval: resumable
    assert "EOFError" not in output and "error:" not in output
    assert f"planmode resume t1 --db {tmp_path / 'r.sqlite'}" in output
    assert not (tmp_path / "ws" / "notes.md").exists()
