"""Which files a step produces is declared (its file checks), never read from its prose.

- a done step's declared file is kept from every later step, though its prose names no file;
- a step that declares the same file (a fix of it) may write it;
- a file a done step's prose names, but that no check declares, is not kept by the core (no English read);
- with the small-model adapter on, the one file a write step declares is where a call named after the step writes,
  though its prose names none; without the adapter, no call is repaired;
- ``done_files`` is one pass over the plan's checks, whatever the steps' prose holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import ToolMessage

from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.state.checks import declared_files, done_files, empty_file
from planmode.state.models import Plan
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest, tool_call
from planmode.tools import workspace_tools

CFG: Any = {"configurable": {"thread_id": "declared-files"}}
GIVE_UP = {"assessment": "failed", "reasoning": "the step cannot be done"}
PASS = {"assessment": "passed", "reasoning": "ok"}


def run(tmp_path: Path, steps: list[dict[str, Any]], execute: Any, **context: Any) -> tuple[dict[str, Any], Any]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    script = PurposeScript(plan={"title": "t", "steps": steps}, execute=execute, reflect=GIVE_UP, verify=PASS)
    model = ScriptedChatModel(responder=script)
    ctx = {"mode": "plan", "approval": "auto", "max_explore_calls": 0, "max_attempts": 1, **context}
    saver = sqlite_checkpointer(tmp_path / "runs.sqlite")
    try:
        out: dict[str, Any] = build_graph(model, tools=workspace_tools(ws), checkpointer=saver).invoke(
            {"task": "make the two files"}, CFG, context=ctx
        )
    finally:
        saver.conn.close()
    return out, model


def results(model: Any, step_text: str) -> list[ToolMessage]:
    return [m for r in model.requests if r.purpose == "execute" and step_text in r.text() for m in r.tool_results()]


GREETING = {
    "id": "greeting",
    "description": "Write the greeting",  # names no file: only the check says which
    "tools": ["write_file"],
    "checks": [{"kind": "file", "path": "greet.txt", "contains": ["hello"]}],
}


def test_a_done_steps_declared_file_is_kept_though_its_prose_names_none(tmp_path: Path) -> None:
    other = {
        "id": "other",
        "description": "Write the farewell",
        "dependencies": ["greeting"],
        "tools": ["write_file"],
        "checks": [{"kind": "file", "path": "bye.txt"}],
    }

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        if "Step `greeting`" in req.text():
            return {"tool_calls": [tool_call("write_file", path="greet.txt", content="hello\n")]}
        return {"tool_calls": [tool_call("write_file", path="./greet.txt", content="overwritten\n")]}

    out, model = run(tmp_path, [GREETING, other], execute)
    assert (tmp_path / "ws" / "greet.txt").read_text() == "hello\n"
    refused = results(model, "Step `other`")
    assert refused and refused[0].status == "error" and "refused" in str(refused[0].content), refused
    assert out["status"] != "completed"  # bye.txt was never written: its check fails


def test_a_step_that_declares_a_done_steps_file_may_write_it(tmp_path: Path) -> None:
    fix = {
        "id": "fix",
        "description": "Make the greeting louder",
        "dependencies": ["greeting"],
        "tools": ["write_file"],
        "checks": [{"kind": "file", "path": "greet.txt", "contains": ["HELLO"]}],
    }

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        content = "hello\n" if "Step `greeting`" in req.text() else "hello HELLO\n"
        return {"tool_calls": [tool_call("write_file", path="greet.txt", content=content)]}

    out, _ = run(tmp_path, [GREETING, fix], execute)
    assert (tmp_path / "ws" / "greet.txt").read_text() == "hello HELLO\n"  # the first check still holds at the end
    assert out["status"] == "completed", out.get("error")


def test_the_core_keeps_no_file_a_done_steps_prose_names_without_declaring_it(tmp_path: Path) -> None:
    notes = {
        "id": "notes",
        "description": "Write notes.txt",  # its prose names notes.txt; its check declares summary.txt only
        "tools": ["write_file"],
        "checks": [{"kind": "file", "path": "summary.txt"}],
    }
    later = {
        "id": "later",
        "description": "Rewrite the notes",
        "dependencies": ["notes"],
        "tools": ["write_file"],
        "checks": [{"kind": "file", "path": "notes.txt", "contains": ["two"]}],
    }

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        if "Step `notes`" in req.text():
            return {
                "tool_calls": [
                    tool_call("write_file", path="notes.txt", content="one\n"),
                    tool_call("write_file", path="summary.txt", content="s\n"),
                ]
            }
        return {"tool_calls": [tool_call("write_file", path="notes.txt", content="two\n")]}

    out, _ = run(tmp_path, [notes, later], execute)
    assert (tmp_path / "ws" / "notes.txt").read_text() == "two\n"
    assert out["status"] == "completed", out.get("error")


def test_a_call_named_after_the_step_writes_the_one_file_it_declares_with_the_adapter_only(tmp_path: Path) -> None:
    """The call repair is the small-model adapter's: with it, a call named after the step writes the step's
    declared file (its prose names none); without it, the call is run as made: no tool has that name."""
    report = {
        "id": "report",
        "description": "Write the report",
        "tools": ["write_file"],
        "checks": [{"kind": "file", "path": "docs/report.md", "contains": ["# Report"]}],
    }

    def execute(req: ScriptRequest) -> Any:
        if req.tool_results():
            return "done"
        return {"tool_calls": [tool_call("report", content="# Report\n")]}  # no path: the step's declared file

    for profile, where in (("small", tmp_path / "small"), ("default", tmp_path / "default")):
        (where / "ws" / "docs").mkdir(parents=True)
        out, model = run(where, [report], execute, model_profile=profile)
        written = (where / "ws" / "docs" / "report.md").exists()
        if profile == "small":
            assert (where / "ws" / "docs" / "report.md").read_text() == "# Report\n"
            assert out["status"] == "completed", out.get("error")
        else:
            assert not written and out["status"] != "completed"
            said = results(model, "Step `report`")
            assert said and said[0].status == "error", said


def test_done_files_reads_the_checks_only() -> None:
    plan = Plan.model_validate(
        {
            "goal": "g",
            "steps": [
                {**GREETING, "status": "done"},
                {
                    "id": "gone",
                    "description": "Remove old.txt; write a.py",
                    "status": "done",
                    "checks": [
                        {"kind": "file", "path": "old.txt", "exists": False},
                        {"kind": "file", "path": "./a.py"},
                    ],
                },
                {"id": "open", "description": "Write greet.txt and b.py", "checks": [{"kind": "file", "path": "b.py"}]},
                {"id": "me", "description": "x", "checks": [{"kind": "file", "path": "a.py", "equals": ""}]},
            ],
        }
    )
    me = plan.steps[3]
    assert declared_files(plan.steps[1]) == ["a.py"]  # a file that must not exist is not produced
    assert done_files(plan, plan.steps[2]) == frozenset({"greet.txt", "a.py"})  # its prose names greet.txt: no matter
    assert done_files(plan, me) == frozenset({"greet.txt"})  # its own declared file is its to write
    assert empty_file(me, "./a.py") and not empty_file(plan.steps[0], "greet.txt")
