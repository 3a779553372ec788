"""Errors where they belong (issue 23 item 9): planmode's own errors on stderr; a piped run still asks on the
terminal when stdin is one; no wrapping at 80 columns when stdout is not a terminal; plain progress lines on
TERM=dumb. Real subprocesses, and a pseudo-terminal where a terminal matters."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pexpect
import pytest
from rich.text import Text

from planmode.cli import ui
from planmode.persistence import sqlite_checkpointer
from planmode.testing.openai_server import ScriptedOpenAIServer
from tests.cli.test_cli import PLANMODE, _env, _responder

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _no_columns_env(**extra: str) -> dict[str, str]:
    env = _env(**extra)
    env.pop("COLUMNS")
    return env


def test_errors_go_to_stderr_not_into_the_output_file(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    sqlite_checkpointer(db).conn.close()
    out = tmp_path / "plan.mmd"
    with out.open("w") as f:  # show X --mermaid > plan.mmd
        proc = subprocess.run(
            [*PLANMODE, "show", "nope", "--mermaid", "--db", str(db)],
            stdout=f, stderr=subprocess.PIPE, env=_env(), text=True, timeout=60, check=False,
        )  # fmt: skip
    assert proc.returncode == 2
    assert out.read_text() == ""
    assert proc.stderr.startswith("error:") and "nope" in proc.stderr


def test_piped_output_is_not_wrapped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    long = " ".join(f"word{i}" for i in range(60))  # about 400 characters
    ui.console.print(Text(long))
    assert capsys.readouterr().out == long + "\n"
    # A long error line on a pipe, in a real process: one line on stderr.
    missing = tmp_path / ("a-rather-long-folder-name-" * 4) / "runs.sqlite"
    proc = subprocess.run(
        [*PLANMODE, "ls", "--db", str(missing)], capture_output=True, text=True, env=_no_columns_env(), timeout=60,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and str(missing) in proc.stderr


def _run_args(srv: ScriptedOpenAIServer, ws: Path, db: Path, *extra: str) -> list[str]:
    return [
        "run", "Write notes.md with a heading, then read it back", "--workspace", str(ws), "--db", str(db),
        "--thread", "t1", "--mode", "plan", "--base-url", srv.base_url, "--model", "scripted", *extra,
    ]  # fmt: skip


def test_term_dumb_shows_plain_progress_lines(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    seen: dict[str, int] = {}
    with ScriptedOpenAIServer(_responder(seen)) as srv:
        env = _env(OPENAI_API_KEY="test")
        env["TERM"] = "dumb"
        child = pexpect.spawn(
            PLANMODE[0], [*PLANMODE[1:], *_run_args(srv, ws, tmp_path / "r.sqlite", "--auto-approve")],
            env=env, encoding="utf-8", timeout=60, dimensions=(40, 120),
        )  # fmt: skip
        child.expect(pexpect.EOF)
        output = ANSI.sub("", child.before or "")
        child.close()
    assert child.exitstatus == 0, output
    assert "... planning" in output and "... verifying" in output  # what happens now, as plain lines
    assert "run finished" in output


def test_a_piped_run_asks_on_the_terminal(tmp_path: Path) -> None:
    """``planmode run ... | tee log`` at a terminal: stdin is the terminal, stdout a pipe; the question is asked
    on the terminal and answered there, and the log gets the run's output."""
    ws = tmp_path / "ws"
    ws.mkdir()
    log = tmp_path / "log"
    seen: dict[str, int] = {}
    with ScriptedOpenAIServer(_responder(seen)) as srv:
        cmd = shlex.join([*PLANMODE, *_run_args(srv, ws, tmp_path / "r.sqlite")]) + f" | tee {shlex.quote(str(log))}"
        child = pexpect.spawn(
            "bash", ["-c", cmd], env=_env(OPENAI_API_KEY="test"), encoding="utf-8", timeout=60, dimensions=(40, 160)
        )
        child.expect("Approve this plan")
        child.sendline("a")
        child.expect(pexpect.EOF)
        output = child.before or ""
        child.close()
    assert child.exitstatus == 0, output
    assert (ws / "notes.md").read_text() == "# Notes\n"
    text = log.read_text()
    assert "run finished" in text and "Approve this plan" not in text  # the question went to the terminal only


def test_a_rule_in_piped_output_is_80_columns_not_the_unwrapped_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped output is not wrapped (lines keep their length for grep), but a rule fills the console's width: it is
    drawn 80 columns wide there (the demo's section rules were 100,000 characters long in a pipe)."""
    import io

    from planmode.cli.ui import _console

    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    console = _console(file=out)
    console.rule("Snapshots")
    console.print("x" * 300)
    lines = out.getvalue().splitlines()
    assert len(lines[0]) == 80 and "Snapshots" in lines[0]
    assert lines[1] == "x" * 300  # text is still not wrapped
