"""The approval interrupt: reject with feedback, invalid resume values, and tools held back before approval."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from planmode.graph import build_graph
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest, tool_call
from planmode.tools import read_only

TASK = "Migrate the settings: read the old config, then write the new one, then remove the old file"
PLAN_1 = {
    "title": "Migrate",
    "steps": [
        {"id": "read", "description": "read the old config"},
        {"id": "write", "description": "write the new config", "dependencies": ["read"]},
    ],
}
PLAN_2 = {
    "title": "Migrate, tested",
    "steps": [
        *PLAN_1["steps"],
        {"id": "test", "description": "test the new config", "dependencies": ["write"]},
    ],
}


def thread(name: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def payload(graph: Any) -> dict[str, Any]:
    state = graph.get_state(thread())
    assert len(state.interrupts) == 1
    value: dict[str, Any] = state.interrupts[0].value
    return value


def test_reject_with_feedback_revises_the_plan_and_asks_again(checkpointer: SqliteSaver) -> None:
    model = ScriptedChatModel(responder=PurposeScript(plan=[PLAN_1, PLAN_2]))
    graph = build_graph(model, executor=lambda step, ctx: f"{step.id} ok", checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, thread())
    first = payload(graph)
    assert [s["id"] for s in first["plan"]["steps"]] == ["read", "write"]

    graph.invoke(Command(resume={"action": "reject", "feedback": "Add a step that tests the new config"}), thread())

    second = payload(graph)
    assert model.calls("plan") == 2
    revision_request = [r for r in model.requests if r.purpose == "plan"][1]
    assert "Add a step that tests the new config" in revision_request.text()
    assert second["revision"] != first["revision"]
    assert [s["id"] for s in second["plan"]["steps"]] == ["read", "write", "test"]
    assert second["error"] is None
    assert graph.get_state(thread()).values["status"] == "awaiting_approval"

    graph.invoke(Command(resume={"action": "approve", "revision": first["revision"]}), thread())
    assert "stale revision" in payload(graph)["error"]  # the plan shown now is the revised one

    graph.invoke(Command(resume={"action": "approve", "revision": second["revision"]}), thread())
    values = graph.get_state(thread()).values
    assert values["status"] == "completed"
    assert values["report"]["done"] == ["read", "write", "test"]
    assert [r.source for r in values["plan"].history[-2:]] == ["planner (revision)", "approval"]


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ({"action": "ship-it"}, "unknown action 'ship-it'"),
        ({"action": "approve", "revision": "0000000000000000"}, "stale revision '0000000000000000'"),
        ({"action": "approve"}, "approve must name the revision shown"),
        ({"action": "reject", "feedback": "  "}, "reject needs non-empty 'feedback'"),
        ("yes please", "unreadable answer"),
        (42, "must be a JSON object"),
    ],
    ids=["unknown-action", "stale-revision", "no-revision", "empty-feedback", "not-json", "not-an-object"],
)
def test_an_invalid_resume_value_asks_again_with_the_error(checkpointer: SqliteSaver, answer: Any, error: str) -> None:
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN_1))
    graph = build_graph(model, executor=lambda step, ctx: "ok", checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, thread())
    shown = payload(graph)

    graph.invoke(Command(resume=answer), thread())

    again = payload(graph)
    assert error in again["error"]
    assert again["revision"] == shown["revision"]
    assert model.calls("plan") == 1  # asked again, not re-planned
    assert all(
        s.status.value == "pending" and s.attempts == 0 for s in graph.get_state(thread()).values["plan"].steps
    )  # nothing ran
    graph.invoke(Command(resume={"action": "approve", "revision": again["revision"]}), thread())
    assert graph.get_state(thread()).values["status"] == "completed"


def test_the_planner_may_explore_with_read_only_tools_but_write_tools_are_refused(
    checkpointer: SqliteSaver,
) -> None:
    invoked: list[str] = []

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        invoked.append(f"read {path}")
        return f"contents of {path}: port=8080"

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        invoked.append(f"delete {path}")
        return f"deleted {path}"

    @tool
    def stat_file(path: str) -> str:
        """Stat a file (marked read-only through metadata)."""
        invoked.append(f"stat {path}")
        return f"{path}: 12 bytes"

    @tool
    def touch_file(path: str) -> str:
        """Touch a file (a truthy marking that is not ``True`` does not make a tool read-only)."""
        invoked.append(f"touch {path}")
        return f"touched {path}"

    stat_file.metadata = {"planmode_read_only": True}
    touch_file.metadata = {"planmode_read_only": "yes"}
    tools: list[BaseTool] = [read_only(read_file), delete_file, stat_file, touch_file]

    def explore(req: ScriptRequest) -> Any:
        if not req.tool_results():
            return {
                "tool_calls": [
                    tool_call("delete_file", path="old.cfg"),
                    tool_call("read_file", path="old.cfg"),
                    tool_call("stat_file", path="old.cfg"),
                    tool_call("touch_file", path="x"),
                ]
            }
        return "The old config sets port 8080."

    def execute(req: ScriptRequest) -> Any:
        if req.step_id == "write" and not req.tool_results():
            return {"tool_calls": [tool_call("delete_file", path="old.cfg")]}
        return f"{req.step_id} done"

    # the write step declares the tool it calls (a step runs with the read-only tools plus the ones it declares)
    # (and, as a write step, carries acceptance: issue 24 sends a plan without it back)
    write = {**PLAN_1["steps"][1], "tools": ["delete_file"], "acceptance": "the old config is deleted"}
    plan = {**PLAN_1, "steps": [PLAN_1["steps"][0], write]}
    model = ScriptedChatModel(responder=PurposeScript(plan=plan, explore=explore, execute=execute))
    graph = build_graph(model, tools=tools, checkpointer=checkpointer)

    graph.invoke({"messages": [("user", TASK)]}, thread())

    assert sorted(invoked) == [
        "read old.cfg",
        "stat old.cfg",
    ]  # the write tool was never invoked (calls of one turn run in parallel)
    second_explore = [r for r in model.requests if r.purpose == "explore"][1]
    results = {m.name: m for m in second_explore.tool_results()}
    assert isinstance(results["delete_file"], ToolMessage)
    # the explorer is not shown the write tools: a call to one is an unknown tool's error, and runs nothing
    assert [t["function"]["name"] for t in second_explore.tools] == ["read_file", "stat_file"]
    assert results["delete_file"].content.startswith("Error: delete_file is not a valid tool")
    assert results["delete_file"].status == "error"
    assert results["touch_file"].content.startswith("Error: touch_file is not a valid tool")
    assert results["read_file"].content == "contents of old.cfg: port=8080"
    assert results["stat_file"].content == "old.cfg: 12 bytes"
    plan_request = next(r for r in model.requests if r.purpose == "plan")
    assert "The old config sets port 8080." in plan_request.text()  # findings reach the planner

    # After approval the same tool is allowed: the gate is about approval, not about the tool.
    graph.invoke(Command(resume={"action": "approve", "revision": payload(graph)["revision"]}), thread())
    assert graph.get_state(thread()).values["status"] == "completed"
    assert invoked[-1] == "delete old.cfg"


def test_editing_the_state_during_the_interrupt_asks_again_with_the_edited_plan(checkpointer: SqliteSaver) -> None:
    """What Studio does: ``update_state`` while the run waits for approval. The edit goes through the plan
    reducer and the approval is asked again with the edited plan, never dropped."""
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN_1))
    graph = build_graph(model, checkpointer=checkpointer)
    cfg = thread()
    graph.invoke({"messages": [("user", TASK)]}, cfg, context={"mode": "plan"})
    first = payload(graph)
    graph.update_state(
        cfg,
        {
            "plan": {
                "reason": "one more step",
                "add_steps": [{"id": "verify_new", "description": "check the new config loads"}],
            }
        },
    )
    state = graph.get_state(cfg)
    assert state.next == ("approve",)
    graph.invoke(None, cfg)  # the approval node runs again and interrupts with the edited plan
    second = payload(graph)
    assert second["revision"] != first["revision"]
    assert [s["id"] for s in second["plan"]["steps"]][-1] == "verify_new"
    graph.invoke(Command(resume={"action": "approve", "revision": first["revision"]}), cfg)
    assert "stale revision" in payload(graph)["error"]  # the old revision no longer approves anything
    graph.invoke(Command(resume={"action": "approve", "revision": second["revision"]}), cfg)
    values = graph.get_state(cfg).values
    assert values["status"] == "completed"
    assert values["plan"].get("verify_new").status.value == "done"
