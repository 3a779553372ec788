"""Plan mode as a tool of a parent agent (``planmode.as_tool`` + ``planmode.guard_tools``), on a real SQLite file.

The parent is LangGraph's prebuilt ReAct agent driven by a scripted model. It calls ``plan_mode``; planmode
runs as a nested graph on the parent's checkpointer; its approval interrupt surfaces at the parent and is
answered through it (approve, edit, reject, cancel); the report comes back as a tool message; done steps are
not run again on resume; and the parent's own write tools are refused while plan mode is on.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.prebuilt import create_react_agent
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from planmode import as_tool, guard_tools
from planmode.agent_tool import PlanModeGuard, pending_plan_mode_calls
from planmode.approval import Cancel, parse_resume
from planmode.context import PlanModeContext
from planmode.errors import ConfigurationError
from planmode.executors import StepContext
from planmode.graph import build_graph
from planmode.persistence import planmode_serializer, sqlite_checkpointer
from planmode.runs import list_runs
from planmode.state.models import Plan, Step
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest, tool_call
from planmode.tools import read_only

pytestmark = [
    pytest.mark.integration,
    # create_react_agent is deprecated in favour of langchain's create_agent (not a dependency here); the
    # prebuilt agent still runs tools through the same ToolNode, which is what this module exercises.
    pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10"),
]

TASK = "Ship the release: collect the changelog, then write the notes"
PLAN = {
    "title": "Release",
    "steps": [
        {"id": "changelog", "description": "Collect the changelog"},
        {"id": "notes", "description": "Write the release notes", "dependencies": ["changelog"]},
    ],
}
REVISED = {
    "title": "Release, announced",
    "steps": [
        *PLAN["steps"],
        {"id": "announce", "description": "Announce the release", "dependencies": ["notes"]},
    ],
}


class World:
    """What the tools change, and what ran: planmode's step executions and the parent's writes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.executions: dict[str, int] = {}
        self.notes: list[str] = []
        self.tool_runs = 0

    def execute(self, step: Step, ctx: StepContext) -> str:
        with self.lock:
            self.executions[step.id] = self.executions.get(step.id, 0) + 1
        if step.description == "Write the release notes, flawed":
            raise RuntimeError("the notes came out wrong")
        return f"{step.id} finished"

    def parent_tools(self) -> list[BaseTool]:
        @tool
        def write_note(text: str) -> str:
            """Write a note (changes things)."""
            self.notes.append(text)
            return "written"

        @tool
        def read_notes() -> str:
            """Read the notes."""
            return "\n".join(self.notes) or "(no notes)"

        return [write_note, read_only(read_notes)]


class Parent:
    """The parent's scripted model: ``turns[n]`` answers its (n+1)-th call; the last one is its final answer."""

    def __init__(self, *turns: list[dict[str, Any]]) -> None:
        self.turns = turns
        self.calls = 0

    def __call__(self, req: ScriptRequest) -> Any:
        assert req.purpose == "unknown"  # the parent's prompts carry no planmode:<purpose> line
        assert any(t["function"]["name"] == "plan_mode" for t in req.tools)
        self.calls += 1
        n = sum(1 for m in req.messages if isinstance(m, AIMessage))
        if n < len(self.turns):
            return {"tool_calls": self.turns[n]}
        return "All done."


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "parent.sqlite"


@pytest.fixture
def savers() -> Iterator[list[SqliteSaver]]:
    opened: list[SqliteSaver] = []
    yield opened
    for saver in opened:
        saver.conn.close()


def build_parent(db: Path, savers: list[SqliteSaver], parent: Parent, world: World, *plans: dict[str, Any],
                 settings: PlanModeContext | None = None, **script: Any) -> Any:
    """The parent agent on the SQLite file ``db``; each call is a fresh connection (a new process)."""
    planner = ScriptedChatModel(responder=PurposeScript(plan=list(plans or [PLAN]), **script))
    plan_mode = _counting(as_tool(planner, executor=world.execute, settings=settings), world)
    saver = sqlite_checkpointer(db)
    savers.append(saver)
    return create_react_agent(ScriptedChatModel(responder=parent), guard_tools([plan_mode, *world.parent_tools()]),
                              checkpointer=saver)


def _counting(plan_mode: BaseTool, world: World) -> BaseTool:
    """Count how often the tool's function runs (it runs again on every resume)."""
    func = plan_mode.func  # type: ignore[attr-defined]

    def counted(task: str, config: RunnableConfig) -> Any:
        world.tool_runs += 1
        return func(task, config)

    plan_mode.func = counted  # type: ignore[attr-defined]
    return plan_mode


def cfg(thread_id: str = "parent") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def tool_messages(out: dict[str, Any], name: str) -> list[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == name]


def the_interrupt(agent: Any) -> dict[str, Any]:
    """The one pending interrupt, as the parent's state shows it."""
    state = agent.get_state(cfg())
    assert state.next == ("tools",)
    (interrupt,) = state.interrupts
    value: dict[str, Any] = interrupt.value
    assert value["type"] == "planmode.approval"
    return value


def test_approve_through_the_parent_returns_the_report_and_refuses_writes_during_plan_mode(
    db: Path, savers: list[SqliteSaver]
) -> None:
    world = World()
    parent = Parent(
        [tool_call("plan_mode", task=TASK), tool_call("write_note", text="too early"), tool_call("read_notes")],
        [tool_call("write_note", text="after plan mode")],
    )
    agent = build_parent(db, savers, parent, world)

    out = agent.invoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())

    (surfaced,) = out["__interrupt__"]
    payload = the_interrupt(agent)
    assert payload == surfaced.value
    assert [s["id"] for s in payload["plan"]["steps"]] == ["changelog", "notes"]
    assert "cancel" in payload["actions"]
    assert world.notes == [] and world.executions == {}  # the write asked for during plan mode did not run

    # Resume through the parent, from a new connection to the same file (as a new process would).
    agent = build_parent(db, savers, parent, world)
    out = agent.invoke(Command(resume={"action": "approve", "revision": payload["revision"]}), cfg())

    assert "__interrupt__" not in out
    (report,) = tool_messages(out, "plan_mode")
    assert report.status == "success"
    assert "Plan mode finished: completed." in report.content
    assert "- notes [done]" in report.content
    assert report.artifact["status"] == "completed"
    assert [s["status"] for s in report.artifact["plan"]["steps"]] == ["done", "done"]
    refused, after = tool_messages(out, "write_note")
    assert refused.status == "error" and "plan mode" in refused.content
    assert after.status == "success"
    (read,) = tool_messages(out, "read_notes")
    assert read.status == "success"  # read-only tools run during plan mode
    assert world.notes == ["after plan mode"]  # writes are available again afterwards
    assert world.executions == {"changelog": 1, "notes": 1}
    assert world.tool_runs == 2  # called, then called again on resume: the nested run resumed, not restarted
    assert out["messages"][-1].content == "All done."
    assert parent.calls == 3


def test_edit_through_the_parent_executes_the_edited_plan(db: Path, savers: list[SqliteSaver]) -> None:
    world = World()
    agent = build_parent(db, savers, Parent([tool_call("plan_mode", task=TASK)]), world)
    agent.invoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())
    payload = the_interrupt(agent)

    edit = {"action": "edit", "revision": payload["revision"], "patch": {
        "reason": "tell people", "add_steps": [
            {"id": "announce", "description": "Announce the release", "dependencies": ["notes"]}]}}
    out = agent.invoke(Command(resume=edit), cfg())

    (report,) = tool_messages(out, "plan_mode")
    assert "- announce [done]: Announce the release" in report.content
    assert report.artifact["plan"]["version"] == 2
    assert world.executions == {"changelog": 1, "notes": 1, "announce": 1}


def test_the_plan_comes_from_planmode_not_from_the_tool_arguments(db: Path, savers: list[SqliteSaver]) -> None:
    world = World()
    smuggled = {"title": "Mine", "steps": [{"id": "rm_rf", "description": "Delete everything"}]}
    agent = build_parent(db, savers, Parent([tool_call("plan_mode", task=TASK, plan=smuggled)]), world)

    agent.invoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())
    payload = the_interrupt(agent)
    assert [s["id"] for s in payload["plan"]["steps"]] == ["changelog", "notes"]
    out = agent.invoke(Command(resume={"action": "approve", "revision": payload["revision"]}), cfg())

    assert "rm_rf" not in tool_messages(out, "plan_mode")[0].content
    assert world.executions == {"changelog": 1, "notes": 1}


def test_reject_keeps_the_parent_in_plan_mode_and_the_feedback_reaches_the_result(
    db: Path, savers: list[SqliteSaver]
) -> None:
    world = World()
    parent = Parent([tool_call("plan_mode", task=TASK)])
    agent = build_parent(db, savers, parent, world, PLAN, REVISED)
    agent.invoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())
    first = the_interrupt(agent)

    out = agent.invoke(Command(resume={"action": "reject", "feedback": "Announce it too"}), cfg())

    # Still in plan mode: the revised plan is asked for at the parent; the parent's model did not run.
    (surfaced,) = out["__interrupt__"]
    second = the_interrupt(agent)
    assert surfaced.value == second
    assert [s["id"] for s in second["plan"]["steps"]] == ["changelog", "notes", "announce"]
    assert second["revision"] != first["revision"]
    assert parent.calls == 1
    assert world.executions == {}

    out = agent.invoke(Command(resume={"action": "approve", "revision": second["revision"]}), cfg())
    (report,) = tool_messages(out, "plan_mode")
    assert "Plan mode finished: completed." in report.content
    assert "'Announce it too'" in report.content  # the feedback is in the tool result
    assert world.executions == {"changelog": 1, "notes": 1, "announce": 1}


def test_cancel_leaves_plan_mode_with_the_feedback_and_writes_work_again(db: Path, savers: list[SqliteSaver]) -> None:
    world = World()
    parent = Parent([tool_call("plan_mode", task=TASK)], [tool_call("write_note", text="just a note")])
    agent = build_parent(db, savers, parent, world)
    agent.invoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())
    the_interrupt(agent)

    out = agent.invoke(Command(resume={"action": "cancel", "feedback": "Not this week"}), cfg())

    assert "__interrupt__" not in out
    (report,) = tool_messages(out, "plan_mode")
    assert "cancelled the plan with this feedback: Not this week" in report.content
    assert "Nothing was executed." in report.content
    assert report.artifact["status"] == "cancelled"
    assert report.artifact["report"]["feedback"] == "Not this week"
    assert world.executions == {}
    (write,) = tool_messages(out, "write_note")
    assert write.status == "success" and world.notes == ["just a note"]
    # The nested run is stored in the parent's database as a cancelled planmode run.
    (run,) = list_runs(savers[-1])
    assert run.thread_id == "parent" and run.checkpoint_ns.startswith("tools:")
    assert run.status == "cancelled" and run.goal == TASK


def test_resuming_a_re_approval_after_a_patch_does_not_rerun_done_steps(db: Path, savers: list[SqliteSaver]) -> None:
    world = World()
    flawed = {"title": "Release", "steps": [
        PLAN["steps"][0], {**PLAN["steps"][1], "description": "Write the release notes, flawed"}]}
    script = {
        "reflect": {"assessment": "off_track", "reasoning": "the notes step is wrong", "guidance": "rewrite it"},
        "patch": {"reason": "rewrite the notes step",
                  "update_steps": [{"id": "notes", "description": "Write the release notes"}]},
    }
    settings = PlanModeContext(mode="plan", max_attempts=1)
    parent = Parent([tool_call("plan_mode", task=TASK)])
    agent = build_parent(db, savers, parent, world, flawed, settings=settings, **script)
    agent.invoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())
    first = the_interrupt(agent)

    out = agent.invoke(Command(resume={"action": "approve", "revision": first["revision"]}), cfg())

    # changelog is done, notes failed, the off-track patch needs approval again: a second interrupt.
    (surfaced,) = out["__interrupt__"]
    assert surfaced.value["reason"] == "re-approval after a patch: rewrite the notes step"
    assert surfaced.value["changes"]["updated"] == {"notes": {
        "description": ["Write the release notes, flawed", "Write the release notes"]}}
    assert world.executions == {"changelog": 1, "notes": 1}
    steps = {s["id"]: s["status"] for s in surfaced.value["plan"]["steps"]}
    assert steps == {"changelog": "done", "notes": "pending"}

    agent = build_parent(db, savers, parent, world, flawed, settings=settings, **script)  # a new process
    out = agent.invoke(Command(resume={"action": "approve", "revision": surfaced.value["revision"]}), cfg())

    (report,) = tool_messages(out, "plan_mode")
    assert "Plan mode finished: completed." in report.content
    assert world.executions == {"changelog": 1, "notes": 2}  # changelog was not run again
    assert world.tool_runs == 3
    assert parent.calls == 2


def test_the_guard_refuses_writes_and_a_second_plan_while_a_plan_mode_call_is_pending() -> None:
    world = World()
    write_note, read_notes = world.parent_tools()
    plan_mode = as_tool(ScriptedChatModel(responder=PurposeScript(plan=PLAN)))
    guard = PlanModeGuard([plan_mode.name])
    calls = [
        {"name": "plan_mode", "args": {"task": "a"}, "id": "p1", "type": "tool_call"},
        {"name": "plan_mode", "args": {"task": "b"}, "id": "p2", "type": "tool_call"},
        {"name": "write_note", "args": {"text": "x"}, "id": "w1", "type": "tool_call"},
        {"name": "read_notes", "args": {}, "id": "r1", "type": "tool_call"},
    ]
    by_name = {"plan_mode": plan_mode, "write_note": write_note, "read_notes": read_notes}

    def refused(state: dict[str, Any]) -> dict[str, bool]:
        out = {}
        for call in calls:
            request = ToolCallRequest(tool_call=call, tool=by_name[call["name"]], state=state,
                                      runtime=None)  # type: ignore[arg-type]  # the guard reads no runtime
            out[call["id"]] = guard.refusal(request) is not None
        return out

    during = {"messages": [HumanMessage("go"), AIMessage(content="", tool_calls=calls)]}
    assert pending_plan_mode_calls(during["messages"], ["plan_mode"]) == ["p1", "p2"]
    assert refused(during) == {"p1": False, "p2": True, "w1": True, "r1": False}

    answered = {"messages": [*during["messages"], ToolMessage("report", tool_call_id="p1", name="plan_mode"),
                             ToolMessage("refused", tool_call_id="p2", name="plan_mode")]}
    assert pending_plan_mode_calls(answered["messages"], ["plan_mode"]) == []
    assert refused(answered) == dict.fromkeys(["p1", "p2", "w1", "r1"], False)
    assert refused({"messages": [HumanMessage("go")]}) == dict.fromkeys(["p1", "p2", "w1", "r1"], False)


def test_setup_errors_name_the_fix() -> None:
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    with pytest.raises(ConfigurationError, match="without a checkpointer"):
        as_tool(graph=build_graph(model, checkpointer=InMemorySaver()))
    with pytest.raises(ConfigurationError, match="as_tool"):
        guard_tools(World().parent_tools())
    plan_mode = as_tool(model)
    assert list(plan_mode.get_input_schema().model_json_schema()["properties"]) == ["task"]


def test_the_async_path_interrupts_and_resumes_through_the_parent(tmp_path: Path) -> None:
    world = World()
    parent = Parent([tool_call("plan_mode", task=TASK), tool_call("write_note", text="too early")])

    async def run() -> dict[str, Any]:
        async with aiosqlite.connect(str(tmp_path / "async.sqlite")) as conn:
            saver = AsyncSqliteSaver(conn, serde=planmode_serializer())
            planner = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
            plan_mode = as_tool(planner, executor=world.execute)
            agent = create_react_agent(ScriptedChatModel(responder=parent),
                                       guard_tools([plan_mode, *world.parent_tools()]), checkpointer=saver)
            out = await agent.ainvoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())
            (surfaced,) = out["__interrupt__"]
            assert (await agent.aget_state(cfg())).interrupts[0].value == surfaced.value
            resume = {"action": "approve", "revision": surfaced.value["revision"]}
            result: dict[str, Any] = await agent.ainvoke(Command(resume=resume), cfg())
            return result

    out = asyncio.run(run())
    (report,) = tool_messages(out, "plan_mode")
    assert "Plan mode finished: completed." in report.content
    (refused,) = tool_messages(out, "write_note")
    assert refused.status == "error" and world.notes == []
    assert world.executions == {"changelog": 1, "notes": 1}


def test_cancel_ends_a_plain_run_cancelled_with_its_feedback(tmp_path: Path) -> None:
    """The cancel action of the approval protocol, on planmode alone (what the tool's cancel relies on)."""
    plan = Plan.model_validate({**PLAN, "goal": TASK, "version": 1})
    assert parse_resume({"action": "cancel"}, plan) == Cancel(feedback="")
    assert parse_resume({"action": "cancel", "feedback": " later "}, plan) == Cancel(feedback="later")
    assert parse_resume({"action": "cancel", "feedback": 3}, plan) == "cancel's 'feedback' must be a string"

    world = World()
    saver = sqlite_checkpointer(tmp_path / "plain.sqlite")
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLAN)), executor=world.execute,
                        checkpointer=saver)
    graph.invoke({"task": TASK}, cfg("plain"), context=PlanModeContext(mode="plan"))
    events = [e for mode, e in graph.stream(Command(resume={"action": "cancel", "feedback": "Not this week"}),
                                            cfg("plain"), stream_mode=["custom", "updates"]) if mode == "custom"]

    values = graph.get_state(cfg("plain")).values
    assert values["status"] == "cancelled" and values["error"] is None
    assert values["report"]["status"] == "cancelled" and values["report"]["feedback"] == "Not this week"
    assert values["messages"][-1].content == "The plan was cancelled at the approval: Not this week"
    assert [e["type"] for e in events] == ["plan_cancelled", "run_finished"]
    assert world.executions == {}
    assert graph.get_state(cfg("plain")).next == ()
    saver.conn.close()
