"""The questions at a terminal, in a real pty (issue 43 item 10, issue 45 item 1).

- A key pressed before a question shows never answers it (the terminal's input is flushed before every question),
  and no empty answer approves: approving takes a typed ``approve`` / ``a`` / ``y``.
- The editor runs once per ``edit`` answer: one that exits at once without a change, one that exits non-zero and
  one that cannot start each go back to the approval question with one line saying so (as ``git commit`` does).
"""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pexpect
import pytest
import typer

from planmode.testing.openai_server import ScriptedOpenAIServer
from tests.cli.test_cli import PLANMODE, _env, _purpose, _responder

TASK = "Write notes.md with a heading, then read it back"


def _spawn(srv: ScriptedOpenAIServer, tmp_path: Path, thread: str, **env: str) -> pexpect.spawn:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return pexpect.spawn(
        PLANMODE[0],
        [
            *PLANMODE[1:], "run", TASK, "--workspace", str(ws), "--db", str(tmp_path / "runs.sqlite"),
            "--thread", thread, "--mode", "plan", "--base-url", srv.base_url, "--model", "scripted",
        ],
        env=_env(OPENAI_API_KEY="test", **env),
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 160),
    )  # fmt: skip


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text.replace("\r", ""))


def _quit_and_check_waiting(child: pexpect.spawn, tmp_path: Path, thread: str) -> str:
    """Answer quit; the run is left waiting for approval (exit 3, its resume command printed), nothing written."""
    child.sendline("q")
    child.expect(pexpect.EOF)
    out = _plain(child.before or "")
    child.close()
    assert child.exitstatus == 3, out
    assert f"planmode resume {thread}" in out.replace("\n", "")
    assert not (tmp_path / "ws" / "notes.md").exists()
    return out


@pytest.mark.parametrize("early", ["a\r", "\r", "y\r", "approve\r\r\r"])
def test_keys_pressed_while_the_plan_is_written_never_approve_it(tmp_path: Path, early: str) -> None:
    planning = threading.Event()
    base = _responder({})

    def respond(body: dict[str, Any]) -> Any:
        if _purpose(body) == "plan":
            planning.set()
            time.sleep(2.0)  # the plan is being written while the keys are pressed
        return base(body)

    with ScriptedOpenAIServer(respond) as srv:
        child = _spawn(srv, tmp_path, "early")
        assert planning.wait(60), "the planner was never asked"
        child.send(early)
        child.expect("Approve this plan")
        # The run waits at the question: the early keys were discarded, nothing ran.
        assert child.expect(["run finished", "step started", "Please answer", pexpect.TIMEOUT], timeout=3) == 3
        child.send("\r")  # Enter alone is not an answer: asked again
        child.expect("Please answer approve, edit, reject, cancel, quit")
        _quit_and_check_waiting(child, tmp_path, "early")


def _counting_editor(tmp_path: Path, status: int) -> tuple[str, Path]:
    """An editor command that counts its launches in a file and exits with ``status`` without changing the file."""
    counter = tmp_path / "launches.txt"
    script = tmp_path / "editor.py"
    script.write_text(f"import sys\nwith open({str(counter)!r}, 'a') as fh:\n    fh.write('x')\nsys.exit({status})\n")
    return f"{sys.executable} {script}", counter


@pytest.mark.parametrize(
    ("status", "said"),
    [(0, "The plan was not changed"), (1, "the editor exited with status 1: the edit is aborted")],
)
def test_an_editor_left_without_a_change_or_failing_runs_once_then_the_question(
    tmp_path: Path, status: int, said: str
) -> None:
    editor, counter = _counting_editor(tmp_path, status)
    with ScriptedOpenAIServer(_responder({})) as srv:
        child = _spawn(srv, tmp_path, "ed", EDITOR=editor, VISUAL="")
        child.expect("Approve this plan")
        child.sendline("e")
        child.expect("back to the approval question")
        assert said in _plain(child.before or "").replace("\n", "")
        child.expect("Approve this plan")
        time.sleep(1.0)  # a looping editor would be relaunched meanwhile
        assert counter.read_text() == "x", f"the editor ran {len(counter.read_text())} times"
        out = _quit_and_check_waiting(child, tmp_path, "ed")
    assert counter.read_text() == "x"
    assert "Traceback" not in out


@pytest.mark.parametrize("var", ["EDITOR", "VISUAL"])
def test_a_missing_editor_is_one_line_naming_the_variable_then_the_question(tmp_path: Path, var: str) -> None:
    other = "VISUAL" if var == "EDITOR" else "EDITOR"
    with ScriptedOpenAIServer(_responder({})) as srv:
        child = _spawn(srv, tmp_path, "noed", **{var: "/nonexistent/editor --wait", other: ""})
        child.expect("Approve this plan")
        child.sendline("e")
        child.expect("back to the approval question")
        line = _plain(child.before or "").strip().splitlines()[-1]
        assert "'/nonexistent/editor'" in line and f"${var}" in line, line
        child.expect("Approve this plan")  # asked again: the run still waits, the process did not end
        out = _quit_and_check_waiting(child, tmp_path, "noed")
    assert "Traceback" not in out and "FileNotFoundError" not in out


def test_an_unexpected_error_while_a_run_waits_prints_its_resume_command(capsys: pytest.CaptureFixture[str]) -> None:
    from planmode.cli.common import friendly, session

    @friendly
    def command() -> None:
        session["resume"] = "planmode resume t1 --db /x/runs.sqlite"
        raise RuntimeError("the terminal went away")

    with pytest.raises(typer.Exit) as ended:
        command()
    err = capsys.readouterr().err
    assert ended.value.exit_code == 1
    assert "RuntimeError: the terminal went away" in err
    assert "continue it with: planmode resume t1 --db /x/runs.sqlite" in err


def test_enter_alone_never_approves_and_ctrl_d_is_later(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every question (the plan's, a per-step one, the budget's) reads through `choose`: an empty answer without a
    named default asks again; the end of input is None (later), never an answer."""
    from planmode.cli import ask

    answers = iter(["", "  ", "a"])
    monkeypatch.setattr("builtins.input", lambda *a: next(answers))
    assert ask.choose("Approve this plan?", ["approve", "quit"], synonyms=ask.YES) == "approve"
    assert next(answers, "drained") == "drained"  # both empty answers were asked again

    def eof(*a: object) -> str:
        raise EOFError

    monkeypatch.setattr("builtins.input", eof)
    assert ask.choose("Go on?", ["approve", "skip"]) is None


def test_the_plan_editor_reports_every_problem_at_once_in_the_forms_words(tmp_path: Path) -> None:
    """A form with a second step of id 'draft', a tool 'bash' that does not exist and an 'after' that names no
    step: the editor reopens once with all three on top; left unchanged then, it goes back to the question."""
    seen = tmp_path / "second_launch.toml"
    script = tmp_path / "editor.py"
    script.write_text(
        "import sys, pathlib\n"
        f"seen = pathlib.Path({str(seen)!r})\n"
        "path = pathlib.Path(sys.argv[1])\n"
        "if seen.exists():\n"
        "    sys.exit(0)\n"
        "if 'ERROR:' in path.read_text():\n"
        "    seen.write_text(path.read_text())\n"
        "    sys.exit(0)\n"
        "with path.open('a') as fh:\n"
        '    fh.write(\'\\n[[steps]]\\nid = "draft"\\ndescription = "again"\\nafter = ["nope"]\\n'
        'tools = ["bash"]\\n\')\n'
    )
    with ScriptedOpenAIServer(_responder({})) as srv:
        child = _spawn(srv, tmp_path, "form", EDITOR=f"{sys.executable} {script}", VISUAL="")
        child.expect("Approve this plan")
        child.sendline("e")
        child.expect("back to the approval question")
        child.expect("Approve this plan")
        _quit_and_check_waiting(child, tmp_path, "form")
    (error,) = [line for line in seen.read_text().splitlines() if line.startswith("# ERROR:")]
    assert "two steps have id 'draft'" in error
    assert "names a tool that does not exist: 'bash'" in error
    assert "comes after 'nope', which is not a step of the plan" in error


def test_form_problems_name_cycles_and_self_references() -> None:
    from planmode.cli.form_check import form_problems

    steps = [
        {"id": "a", "tools": ["read_file"], "dependencies": ["b"]},
        {"id": "b", "tools": [], "dependencies": ["a"]},
        {"id": "c", "tools": [], "dependencies": ["c"]},
        {"id": "", "tools": []},
    ]
    assert form_problems(steps, ["read_file"]) == [
        "step 4 has no id",
        "step 'c' comes after itself",
        "steps 'a' -> 'b' -> 'a' come after each other in a circle",
    ]
    assert form_problems([{"id": "a", "tools": ["read_file"], "dependencies": []}], ["read_file"]) == []
