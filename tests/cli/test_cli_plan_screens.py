"""The plan, per-step and staleness screens (issue 23, items 11, 12, 14): rendered with rich (no Markdown or
Mermaid source), readable at 80 columns (stacked, no word cut), each step's tools with the ones that change things
marked; a skip warns which steps depend on the skipped one and ends cleanly; the editor's form has no internal
fields and reads back to the same plan."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pexpect
import pytest
from rich.console import Console, RenderableType

from planmode.approval import parse_resume
from planmode.approval.staleness import stale_payload
from planmode.cli.ui import approval_screen, plan_table
from planmode.nodes._gates import step_payload
from planmode.state.models import Plan
from planmode.testing.openai_server import ScriptedOpenAIServer
from tests.cli.test_cli_daily import flat, spawn

READ_ONLY = frozenset({"list_files", "read_file", "search_files"})


def shown(renderable: RenderableType, width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, markup=False, emoji=False, highlight=False).print(renderable)
    return buf.getvalue()


def six_steps() -> Plan:
    words = "Write stats.py with mean() and median() and their docstrings"
    return Plan.model_validate(
        {
            "goal": "stats",
            "title": "Statistics module",
            "version": 1,
            "steps": [
                {
                    "id": f"step_{i}",
                    "description": f"{words} number{i}",
                    "tools": ["read_file", "write_file"] if i % 2 else ["list_files"],
                    "dependencies": [f"step_{i - 1}"] if i > 1 else [],
                    "acceptance": "the tests pass",
                    "complexity": "high",
                }
                for i in range(1, 7)
            ],
        }
    )


# -- item 12: the plan at 80 columns, and what writes ---------------------------------------------------------


def test_at_80_columns_the_plan_is_stacked_with_no_word_cut_and_fits_a_screen() -> None:
    plan = six_steps()
    out = shown(plan_table(plan, read_only=READ_ONLY), 80)
    lines = out.splitlines()
    assert lines[0].startswith("Statistics module")  # the title on top
    assert len(lines) <= 24, out  # a 6-step plan fits one 24-line screen with its header
    words = set(re.findall(r"[A-Za-z_]+\d*", " ".join(s.description for s in plan.steps)))
    printed = set(re.findall(r"[A-Za-z_]+\d*", out))
    assert words <= printed, words - printed  # every word whole: none broken across lines
    assert all(len(line.rstrip()) <= 80 for line in lines)


@pytest.mark.parametrize("width", [80, 200])
def test_the_plan_shows_each_steps_tools_and_marks_the_ones_that_write(width: int) -> None:
    out = shown(plan_table(six_steps(), read_only=READ_ONLY), width)
    assert "write_file*" in out and "read_file*" not in out and "list_files*" not in out
    assert "* changes things" in out
    if width == 200:
        assert re.search(r"\btools\b", out.splitlines()[2])  # a column of the table's header


def test_the_approval_screen_marks_writes_by_the_graphs_read_only_tools() -> None:
    plan = six_steps()
    body = json.loads(plan.model_dump_json())
    body["steps"][1]["tools"] = ["list_files", "shell"]
    payload: dict[str, Any] = {
        "plan": body,
        "read_only_tools": ["list_files", "read_file", "write_file"],  # this graph's write_file changes nothing
        "reason": "initial plan",
    }
    out = shown(approval_screen(payload), 200)
    assert "shell*" in out and "write_file*" not in out and "list_files*" not in out


# -- item 11: the per-step and staleness screens --------------------------------------------------------------


def chain() -> Plan:
    return Plan.model_validate(
        {
            "goal": "g",
            "title": "Chain [bold]",
            "version": 1,
            "steps": [
                {"id": "a", "description": "write a [/b]", "tools": ["write_file"]},
                {"id": "b", "description": "read a", "dependencies": ["a"], "tools": ["read_file"]},
                {"id": "c", "description": "sum up", "dependencies": ["b"]},
                {"id": "d", "description": "unrelated"},
            ],
        }
    )


def test_the_step_question_is_rendered_not_markdown_and_names_the_dependents() -> None:
    from planmode.cli.gates import gate_screen
    from planmode.nodes._gates import dependents

    plan = chain()
    payload = step_payload(plan, plan.steps[0], ["write_file"], None)
    out = shown(gate_screen(payload), 80)
    assert "```" not in out and "flowchart" not in out and "## " not in out and "\\[" not in out
    assert "Run step a?" in out and "write a [/b]" in out and "Chain [bold]" in out
    assert "changes things: write_file" in out
    assert re.search(r"depend on it too: b, c\b", out)
    assert dependents(plan, "a") == ["b", "c"] and dependents(plan, "d") == []


def test_the_staleness_question_is_rendered_not_markdown() -> None:
    from planmode.cli.gates import gate_screen

    payload = stale_payload({"digest": "x"}, ["notes [b].md", "src/a_b.py"], error=None)
    payload["plan"] = json.loads(chain().model_dump_json())
    out = shown(gate_screen(payload), 80)
    assert "## " not in out and "\\_" not in out and "\\[" not in out
    assert "The workspace changed since the plan was approved" in out
    assert "notes [b].md" in out and "src/a_b.py" in out and "Chain [bold]" in out


def _responder(body: dict[str, Any]) -> Any:
    first = body["messages"][0]
    text = first["content"] if isinstance(first["content"], str) else json.dumps(first["content"])
    purpose = text.split("\n", 1)[0].removeprefix("planmode:")
    if purpose == "plan":
        return json.dumps(
            {
                "title": "Chain",
                "steps": [
                    {"id": "draft", "description": "Write notes.md", "tools": ["write_file"]},
                    {"id": "check", "description": "Read it", "dependencies": ["draft"], "tools": ["read_file"]},
                    {"id": "sum", "description": "Sum up", "dependencies": ["check"]},
                ],
            }
        )
    if purpose == "verify":
        return json.dumps({"passed": True, "reason": ""})
    return "done"


def test_skipping_a_step_others_depend_on_warns_and_ends_cleanly_in_a_pty(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "r.sqlite"
    with ScriptedOpenAIServer(_responder) as srv:
        args = ["run", "Write notes", "--workspace", str(ws), "--db", str(db), "--thread", "sk", "--mode", "plan"]
        args += ["--auto-approve", "--step-approval", "writes", "--base-url", srv.base_url]
        child = spawn(args, OPENAI_API_KEY="test")
        child.expect("Go on\\?")
        screen = flat(child.before or "")
        assert "Run step draft?" in screen and "```" not in screen and "flowchart" not in screen
        child.sendline("s")
        child.expect(r"Skip draft and 2 dependent step")
        assert re.search(r"also skips the steps that depend on it: check, sum", flat(child.before or ""))
        child.sendline("y")
        child.expect("Why")
        child.sendline("not now")
        child.expect(pexpect.EOF, timeout=120)
        out = flat(child.before or "")
        child.close()
    assert child.exitstatus == 0, out  # ends cleanly: no step left waiting for a dependency never done
    assert "skipped=3" in out, out


def test_no_at_the_skip_confirmation_asks_again_in_a_pty(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with ScriptedOpenAIServer(_responder) as srv:
        args = ["run", "Write notes", "--workspace", str(ws), "--db", str(tmp_path / "r.sqlite"), "--mode", "plan"]
        args += ["--auto-approve", "--step-approval", "writes", "--base-url", srv.base_url]
        child = spawn(args, OPENAI_API_KEY="test")
        child.expect("Go on\\?")
        child.sendline("s")
        child.expect("dependent step")
        child.sendline("n")
        child.expect("Go on\\?")  # asked again
        child.sendline("q")
        child.expect(pexpect.EOF, timeout=60)
        child.close()
    assert child.exitstatus == 3  # left for later, resumable


# -- item 14: the editor's form ---------------------------------------------------------------------------------


def test_the_form_has_no_internal_fields_and_an_untouched_form_changes_nothing() -> None:
    from planmode.cli.plan_form import FormError, read_form, to_form

    plan = six_steps()
    text = to_form(plan, READ_ONLY)
    assert "status" not in text and "complexity" not in text and "attempts" not in text
    assert "[[steps]]" in text and "# changes things: write_file" in text
    body = read_form(text, plan)
    assert not isinstance(body, FormError)
    answer = parse_resume({"action": "edit", "plan": body, "revision": plan.revision}, plan)
    assert isinstance(answer, str) and "changes nothing" in answer  # the complexity the form hides is kept


def test_a_form_error_names_the_line_counting_comments() -> None:
    from planmode.cli.plan_form import FormError, read_form, to_form

    plan = six_steps()
    text = "# a comment\n# another\n\n" + to_form(plan, READ_ONLY).replace('title = "', "title = ", 1)
    err = read_form(text, plan)
    assert isinstance(err, FormError) and err.line == 4, err
    unknown = read_form(text.replace("title = ", 'title = "', 1).replace("acceptance =", "acceptence =", 1), plan)
    assert isinstance(unknown, FormError) and "acceptence" in unknown.message and unknown.line == 6


def test_a_new_step_in_the_form_is_an_edit() -> None:
    from planmode.cli.plan_form import FormError, read_form, to_form

    plan = six_steps()
    text = to_form(plan, READ_ONLY) + '\n[[steps]]\nid = "wrap"\ndescription = "Say bye"\nafter = ["step_6"]\n'
    body = read_form(text, plan)
    assert not isinstance(body, FormError)
    answer = parse_resume({"action": "edit", "plan": body, "revision": plan.revision}, plan)
    assert not isinstance(answer, str), answer
    assert [s.id for s in answer.plan.steps][-1] == "wrap"
