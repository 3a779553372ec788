"""A follow-up remembers (issue 45 item 2): a new run on a thread whose run finished — the CLI's ``--follow-up T``
forks T's head into a new thread and starts the task there — carries a compact summary of the earlier run (its
task, its steps with their statuses, the files it changed, its final answer) into the planner's and the executor's
requests, and into the approval payload. The summary is bounded, and a thread without a finished run gets none.

The rendered follow-up messages are snapshot-tested (tests/graph/snapshots/prompts_follow_up.txt); regenerate after
an intended change with ``PLANMODE_UPDATE_SNAPSHOTS=1``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from planmode.graph import build_graph
from planmode.persistence.snapshots import fork
from planmode.state.earlier import MAX_CHARS, earlier_summary
from planmode.state.models import Plan
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest, tool_call
from planmode.tools import workspace_tools

SNAPSHOT = Path(__file__).parent.parent / "snapshots" / "prompts_follow_up.txt"

FIRST_TASK = "Write notes.md with a heading about the quarterly ledger"
FIRST_PLAN = {
    "title": "Notes",
    "steps": [
        {
            "id": "write_notes",
            "description": "Write notes.md with the heading '# Ledger'",
            "tools": ["write_file"],
            "acceptance": "notes.md exists",
            "checks": [{"kind": "file", "path": "notes.md"}],
        }
    ],
}
SECOND_TASK = "Add a summary section to it"
SECOND_PLAN = {
    "title": "Summary",
    "steps": [
        {
            "id": "add_summary",
            "description": "Append a summary section to notes.md",
            "tools": ["edit_file", "write_file"],
            "acceptance": "notes.md exists",
            "checks": [{"kind": "file", "path": "notes.md"}],
        }
    ],
}
ANSWER = "notes.md now holds the ledger heading (answer-marker-7731)."


def _execute(req: ScriptRequest) -> Any:
    if req.tool_results():
        return f"{req.step_id} done"
    content = "# Ledger\n" if req.step_id == "write_notes" else "# Ledger\n\n## Summary\nAll good.\n"
    return {"tool_calls": [tool_call("write_file", path="notes.md", content=content)]}


def _graph(tmp_path: Path) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(
        responder=PurposeScript(plan=[FIRST_PLAN, SECOND_PLAN], execute=_execute, final=[ANSWER, "Added the summary."])
    )
    return build_graph(model, tools=workspace_tools(tmp_path), checkpointer=InMemorySaver()), model


def _run(graph: Any, thread: str, task: str, **context: Any) -> Any:
    cfg = {"configurable": {"thread_id": thread}}
    return graph.invoke(
        {"messages": [("user", task)]}, cfg, context={"mode": "plan", "max_explore_calls": 0, **context}
    )


def test_a_follow_up_s_planner_and_executor_are_told_what_the_earlier_run_did(tmp_path: Path) -> None:
    graph, model = _graph(tmp_path)
    first = _run(graph, "t1", FIRST_TASK, approval="auto")
    assert first["status"] == "completed", first.get("error")
    fork(graph, "t1", 0, "t2")  # what `planmode run TASK --follow-up t1` does before the new task starts
    before = len(model.requests)
    second = _run(graph, "t2", SECOND_TASK, approval="auto")
    assert second["status"] == "completed", second.get("error")

    requests = model.requests[before:]
    for purpose in ("plan", "execute"):
        asked = [r for r in requests if r.purpose == purpose]
        assert asked, purpose
        text = asked[0].text()
        assert FIRST_TASK in text, (purpose, text)  # the earlier task
        assert "write_notes (done)" in text, (purpose, text)  # its steps, with their statuses
        assert "Files changed: notes.md" in text, (purpose, text)  # the files it changed
        assert "answer-marker-7731" in text, (purpose, text)  # its final answer
        assert SECOND_TASK in text

    # The earlier run on t1 stayed as it was; t1's own first run had no earlier run to carry.
    first_plan = next(r for r in model.requests[:before] if r.purpose == "plan")
    assert "follows up an earlier run" not in first_plan.text()
    assert (tmp_path / "notes.md").read_text().startswith("# Ledger\n\n## Summary")

    rendered = "\n".join(
        f"=== {r.purpose}\n{r.messages[-1].content}" for r in requests if r.purpose in ("plan", "execute")
    ).replace(str(tmp_path), "<ws>")
    if os.environ.get("PLANMODE_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(rendered + "\n", encoding="utf-8")
    assert rendered + "\n" == SNAPSHOT.read_text(encoding="utf-8"), "the follow-up prompts changed; review the diff"


def test_the_approval_shows_the_earlier_run(tmp_path: Path) -> None:
    graph, _ = _graph(tmp_path)
    _run(graph, "t1", FIRST_TASK, approval="auto")
    fork(graph, "t1", 0, "t2")
    _run(graph, "t2", SECOND_TASK)  # asks for approval
    state = graph.get_state({"configurable": {"thread_id": "t2"}})
    payload = state.interrupts[0].value
    assert FIRST_TASK in payload["earlier"] and "answer-marker-7731" in payload["earlier"]

    from planmode.cli.ui import approval_screen, console

    with console.capture() as captured:
        console.print(approval_screen(payload))
    screen = captured.get()
    assert "Follows an earlier run" in screen and "answer-marker-7731" in screen


def test_the_summary_is_bounded_and_only_of_a_finished_run() -> None:
    steps = [{"id": f"s{i}", "description": "x" * 500, "status": "done", "result": "y" * 500} for i in range(40)]
    plan = Plan.model_validate({"goal": "g", "version": 1, "steps": steps})
    values = {"status": "completed", "goal": "g" * 5000, "plan": plan, "report": {"files_changed": ["a"] * 500}}
    summary = earlier_summary(values)
    assert summary is not None and len(summary) <= MAX_CHARS
    assert "more steps" in summary and "Files changed: a, a" in summary
    assert summary.splitlines()[0].startswith("Task: ggg")
    assert earlier_summary({**values, "status": "running"}) is None  # an unfinished run is not summarised
    assert earlier_summary({}) is None  # a new thread
