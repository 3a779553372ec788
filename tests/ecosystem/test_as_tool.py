"""Plan mode as a tool of a parent agent, on a real SQLite file: ``planmode.as_tool`` + ``planmode.guard_tools``
under LangGraph's ``create_react_agent``, and ``planmode.PlanModeMiddleware`` under langchain's ``create_agent``.

The parent is driven by a scripted model. It calls ``plan_mode``; planmode
runs as a nested graph on the parent's checkpointer; its approval interrupt surfaces at the parent and is
answered through it (approve, edit, reject, cancel); the report comes back as a tool message; done steps are
not run again on resume; and the parent's own write tools are refused while plan mode is on.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.prebuilt import create_react_agent
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, interrupt

from planmode import PlanModeMiddleware, as_tool, guard_tools
from planmode.agent_tool import PlanModeGuard, in_plan_mode
from planmode.approval import Cancel, parse_resume
from planmode.context import PlanModeContext
from planmode.errors import ConfigurationError
from planmode.executors import StepContext
from planmode.graph import build_graph
from planmode.persistence import planmode_serializer, sqlite_checkpointer
from planmode.persistence.runs import list_runs
from planmode.state.models import Plan, Step
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest, tool_call
from planmode.tools import read_only

pytestmark = [
    pytest.mark.integration,
    # create_react_agent is deprecated in favour of langchain's create_agent; guard_tools stays for its users, and
    # both agents are exercised here.
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
        self.texts: list[str] = []

    def __call__(self, req: ScriptRequest) -> Any:
        assert req.purpose == "unknown"  # the parent's prompts carry no planmode:<purpose> line
        assert any(t["function"]["name"] == "plan_mode" for t in req.tools)
        self.calls += 1
        self.texts.append(req.text())
        n = sum(1 for m in req.messages if isinstance(m, AIMessage))
        if n < len(self.turns):
            turn = self.turns[n]
            if all("id" in c for c in turn):  # ids given by the test, as the model sent them (even empty ones)
                return AIMessage(content="", tool_calls=[{**c, "type": "tool_call"} for c in turn])
            return {"tool_calls": turn}
        return "All done."


def call_with_id(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    """A tool call with the id the (adversarial) model chose."""
    return {"name": name, "args": args, "id": call_id}


@pytest.fixture(params=["create_react_agent", "create_agent"])
def kind(request: pytest.FixtureRequest) -> str:
    """The parent agent: LangGraph's prebuilt one with guard_tools, or langchain's with PlanModeMiddleware."""
    return str(request.param)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "parent.sqlite"


@pytest.fixture
def savers() -> Iterator[list[SqliteSaver]]:
    opened: list[SqliteSaver] = []
    yield opened
    for saver in opened:
        saver.conn.close()


def build_parent(
    db: Path,
    savers: list[SqliteSaver],
    parent: Parent,
    world: World,
    *plans: dict[str, Any],
    settings: PlanModeContext | None = None,
    kind: str = "create_react_agent",
    **script: Any,
) -> Any:
    """The parent agent on the SQLite file ``db``; each call is a fresh connection (a new process)."""
    planner = ScriptedChatModel(responder=PurposeScript(plan=list(plans or [PLAN]), **script))
    plan_mode = _counting(as_tool(planner, executor=world.execute, settings=settings), world)
    saver = sqlite_checkpointer(db)
    savers.append(saver)
    if kind == "create_agent":
        return create_agent(
            ScriptedChatModel(responder=parent),
            world.parent_tools(),
            checkpointer=saver,
            middleware=[PlanModeMiddleware(tool=plan_mode)],
        )
    return create_react_agent(
        ScriptedChatModel(responder=parent), guard_tools([plan_mode, *world.parent_tools()]), checkpointer=saver
    )


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
    db: Path, savers: list[SqliteSaver], kind: str
) -> None:
    world = World()
    parent = Parent(
        [tool_call("plan_mode", task=TASK), tool_call("write_note", text="too early"), tool_call("read_notes")],
        [tool_call("write_note", text="after plan mode")],
    )
    agent = build_parent(db, savers, parent, world, kind=kind)

    out = agent.invoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())

    (surfaced,) = out["__interrupt__"]
    payload = the_interrupt(agent)
    assert payload == surfaced.value
    assert [s["id"] for s in payload["plan"]["steps"]] == ["changelog", "notes"]
    assert "cancel" in payload["actions"]
    assert world.notes == [] and world.executions == {}  # the write asked for during plan mode did not run

    # Resume through the parent, from a new connection to the same file (as a new process would).
    agent = build_parent(db, savers, parent, world, kind=kind)
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
    # The middleware tells the model about plan mode in its system message; the prebuilt agent has none.
    assert ("## Plan mode" in parent.texts[0]) == (kind == "create_agent")


def test_edit_through_the_parent_executes_the_edited_plan(db: Path, savers: list[SqliteSaver]) -> None:
    world = World()
    agent = build_parent(db, savers, Parent([tool_call("plan_mode", task=TASK)]), world)
    agent.invoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())
    payload = the_interrupt(agent)

    edit = {
        "action": "edit",
        "revision": payload["revision"],
        "patch": {
            "reason": "tell people",
            "add_steps": [{"id": "announce", "description": "Announce the release", "dependencies": ["notes"]}],
        },
    }
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


def test_cancel_leaves_plan_mode_with_the_feedback_and_writes_work_again(
    db: Path, savers: list[SqliteSaver], kind: str
) -> None:
    world = World()
    parent = Parent([tool_call("plan_mode", task=TASK)], [tool_call("write_note", text="just a note")])
    agent = build_parent(db, savers, parent, world, kind=kind)
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
    flawed = {
        "title": "Release",
        "steps": [PLAN["steps"][0], {**PLAN["steps"][1], "description": "Write the release notes, flawed"}],
    }
    script = {
        "reflect": {"assessment": "off_track", "reasoning": "the notes step is wrong", "guidance": "rewrite it"},
        "patch": {
            "reason": "rewrite the notes step",
            "update_steps": [{"id": "notes", "description": "Write the release notes"}],
        },
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
    assert surfaced.value["changes"]["updated"] == {
        "notes": {"description": ["Write the release notes, flawed", "Write the release notes"]}
    }
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


def test_the_guard_decides_from_the_transcript_not_from_tool_call_ids() -> None:
    world = World()
    write_note, read_notes = world.parent_tools()
    plan_mode = as_tool(ScriptedChatModel(responder=PurposeScript(plan=PLAN)))
    guard = PlanModeGuard([plan_mode.name])
    by_name = {"plan_mode": plan_mode, "write_note": write_note, "read_notes": read_notes}

    def turn(*calls: tuple[str, str, dict[str, Any]]) -> AIMessage:
        return AIMessage(
            content="", tool_calls=[{"name": n, "args": a, "id": i, "type": "tool_call"} for n, i, a in calls]
        )

    def refused(messages: list[Any]) -> list[bool]:
        last = messages[-1] if isinstance(messages[-1], AIMessage) else AIMessage(content="")
        out = []
        for call in last.tool_calls:
            request = ToolCallRequest(
                tool_call=call, tool=by_name[call["name"]], state={"messages": messages}, runtime=None
            )  # type: ignore[arg-type]  # the guard reads no runtime
            out.append(guard.refusal(request) is not None)
        return out

    go = HumanMessage("go")
    same_turn = turn(
        ("plan_mode", "p", {"task": "a"}),
        ("plan_mode", "p", {"task": "b"}),
        ("write_note", "p", {}),
        ("read_notes", "p", {}),
    )
    assert in_plan_mode([go, same_turn], ["plan_mode"])
    assert refused([go, same_turn]) == [False, True, True, False]  # the first plan runs; read-only tools run

    twins = turn(("plan_mode", "", {"task": "a"}), ("plan_mode", "", {"task": "a"}), ("write_note", "", {}))
    assert refused([go, twins]) == [True, True, True]  # two calls that cannot be told apart: neither runs

    # An id answered in an earlier turn, reused: the new plan-mode call is what counts.
    earlier = [go, turn(("read_notes", "x", {})), ToolMessage("(no notes)", tool_call_id="x", name="read_notes")]
    reused = turn(("plan_mode", "x", {"task": "a"}), ("write_note", "x", {}))
    assert refused([*earlier, reused]) == [False, True]

    # A plan-mode call left pending (new input arrived instead of an answer) keeps writes refused; a new plan-mode
    # call may run; planmode's answer ends plan mode, a refusal does not.
    left = [go, turn(("plan_mode", "p", {"task": "a"})), HumanMessage("meanwhile")]
    assert refused([*left, turn(("write_note", "w", {}), ("read_notes", "r", {}))]) == [True, False]
    assert refused([*left, turn(("plan_mode", "p", {"task": "a"}), ("write_note", "w", {}))]) == [False, True]
    refusal = ToolMessage("refused", tool_call_id="p", name="plan_mode", artifact={"planmode": "refused"})
    assert refused([*left, refusal, turn(("write_note", "w", {}))]) == [True]
    ended = ToolMessage("Plan mode finished: completed.", tool_call_id="p", name="plan_mode")
    assert refused([*left, ended, turn(("write_note", "w", {}))]) == [False]
    assert refused([go, turn(("write_note", "w", {}), ("read_notes", "r", {}))]) == [False, False]
    assert not in_plan_mode([go], ["plan_mode"])


def _resume_approved(agent: Any) -> dict[str, Any]:
    payload = the_interrupt(agent)
    out: dict[str, Any] = agent.invoke(Command(resume={"action": "approve", "revision": payload["revision"]}), cfg())
    return out


def test_a_reused_tool_call_id_does_not_let_a_write_through(db: Path, savers: list[SqliteSaver], kind: str) -> None:
    world = World()
    parent = Parent(
        [call_with_id("plan_mode", "x", task=TASK)],
        [call_with_id("plan_mode", "x", task=TASK), call_with_id("write_note", "x", text="during")],
    )
    agent = build_parent(db, savers, parent, world, kind=kind)
    agent.invoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())
    out = _resume_approved(agent)  # the first plan mode ends; the model enters it again, reusing the id

    assert "__interrupt__" in out
    assert world.notes == []  # the write asked for with the second plan_mode call did not run
    out = _resume_approved(agent)
    assert "__interrupt__" not in out
    assert world.notes == []
    assert [m.status for m in tool_messages(out, "write_note")] == ["error"]
    assert world.executions == {"changelog": 2, "notes": 2}


def test_empty_tool_call_ids_do_not_let_a_write_through(db: Path, savers: list[SqliteSaver], kind: str) -> None:
    world = World()
    parent = Parent(
        [call_with_id("read_notes", "")],
        [call_with_id("plan_mode", "", task=TASK), call_with_id("write_note", "", text="during")],
    )
    agent = build_parent(db, savers, parent, world, kind=kind)
    out = agent.invoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())

    assert "__interrupt__" in out
    assert world.notes == []
    out = _resume_approved(agent)
    assert world.notes == [] and world.executions == {"changelog": 1, "notes": 1}
    assert [m.status for m in tool_messages(out, "write_note")] == ["error"]


def test_duplicate_ids_in_one_turn_run_one_plan_and_no_write(db: Path, savers: list[SqliteSaver], kind: str) -> None:
    world = World()
    parent = Parent(
        [
            call_with_id("plan_mode", "d", task=TASK),
            call_with_id("plan_mode", "d", task="Something else"),
            call_with_id("write_note", "d", text="during"),
        ]
    )
    agent = build_parent(db, savers, parent, world, kind=kind)
    out = agent.invoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())

    assert len(out["__interrupt__"]) == 1  # one plan at a time
    assert world.notes == []
    out = _resume_approved(agent)
    assert "__interrupt__" not in out
    reports = tool_messages(out, "plan_mode")
    assert sorted(m.status for m in reports) == ["error", "success"]
    assert "one plan at a time" in next(str(m.content) for m in reports if m.status == "error")
    assert world.notes == [] and world.executions == {"changelog": 1, "notes": 1}


def test_two_identical_plan_mode_calls_are_both_refused(db: Path, savers: list[SqliteSaver], kind: str) -> None:
    world = World()
    parent = Parent(
        [
            call_with_id("plan_mode", "", task=TASK),
            call_with_id("plan_mode", "", task=TASK),
            call_with_id("write_note", "", text="during"),
        ],
        [tool_call("write_note", text="after")],
    )
    agent = build_parent(db, savers, parent, world, kind=kind)
    out = agent.invoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())

    assert "__interrupt__" not in out
    assert [m.status for m in tool_messages(out, "plan_mode")] == ["error", "error"]
    assert "more than once" in str(tool_messages(out, "plan_mode")[0].content)
    assert world.notes == ["after"]  # nothing entered plan mode: the next turn's write runs
    assert world.tool_runs == 0


def test_new_input_while_the_approval_is_pending_keeps_writes_refused(
    db: Path, savers: list[SqliteSaver], kind: str
) -> None:
    world = World()
    parent = Parent(
        [tool_call("plan_mode", task=TASK)],
        [tool_call("write_note", text="meanwhile")],
        [tool_call("plan_mode", task=TASK)],
        [tool_call("write_note", text="after")],
    )
    agent = build_parent(db, savers, parent, world, kind=kind)
    agent.invoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())
    the_interrupt(agent)

    new_input = {"messages": [HumanMessage("Never mind, just write a note.")]}
    if kind == "create_react_agent":  # the prebuilt agent refuses a transcript with an unanswered tool call
        with pytest.raises(ValueError, match="INVALID_CHAT_HISTORY"):
            agent.invoke(new_input, cfg())
        assert world.notes == []
        return
    # create_agent takes new input instead of an answer: LangGraph drops the pending tool call and runs the
    # model again, while the nested plan still waits for its approval.
    out = agent.invoke(new_input, cfg())

    assert world.notes == []
    (refused,) = tool_messages(out, "write_note")
    assert refused.status == "error" and "plan mode" in str(refused.content)
    # The model enters plan mode again; that plan is approved and runs, and plan mode ends.
    out = _resume_approved(agent)
    assert "Plan mode finished: completed." in str(tool_messages(out, "plan_mode")[-1].content)
    assert world.notes == ["after"]


def test_setup_errors_name_the_fix() -> None:
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    with pytest.raises(ConfigurationError, match="without a checkpointer"):
        as_tool(graph=build_graph(model, checkpointer=InMemorySaver()))
    with pytest.raises(ConfigurationError, match="as_tool"):
        guard_tools(World().parent_tools())
    with pytest.raises(ConfigurationError, match="as_tool"):
        PlanModeMiddleware(tool=World().parent_tools()[0])
    middleware = PlanModeMiddleware(model, name="enter_plan_mode")
    assert [t.name for t in middleware.tools] == ["enter_plan_mode"]
    assert middleware.system_prompt is not None and "`enter_plan_mode`" in middleware.system_prompt
    plan_mode = as_tool(model)
    assert list(plan_mode.get_input_schema().model_json_schema()["properties"]) == ["task"]


def test_the_async_path_interrupts_and_resumes_through_the_parent(tmp_path: Path, kind: str) -> None:
    world = World()
    parent = Parent([tool_call("plan_mode", task=TASK), tool_call("write_note", text="too early")])

    async def run() -> dict[str, Any]:
        async with aiosqlite.connect(str(tmp_path / "async.sqlite")) as conn:
            saver = AsyncSqliteSaver(conn, serde=planmode_serializer())
            planner = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
            plan_mode = as_tool(planner, executor=world.execute)
            model = ScriptedChatModel(responder=parent)
            if kind == "create_agent":
                agent: Any = create_agent(
                    model, world.parent_tools(), checkpointer=saver, middleware=[PlanModeMiddleware(tool=plan_mode)]
                )
            else:
                agent = create_react_agent(model, guard_tools([plan_mode, *world.parent_tools()]), checkpointer=saver)
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
    graph = build_graph(
        ScriptedChatModel(responder=PurposeScript(plan=PLAN)), executor=world.execute, checkpointer=saver
    )
    graph.invoke({"task": TASK}, cfg("plain"), context=PlanModeContext(mode="plan"))
    events = [
        e
        for mode, e in graph.stream(
            Command(resume={"action": "cancel", "feedback": "Not this week"}),
            cfg("plain"),
            stream_mode=["custom", "updates"],
        )
        if mode == "custom"
    ]

    values = graph.get_state(cfg("plain")).values
    assert values["status"] == "cancelled" and values["error"] is None
    assert values["report"]["status"] == "cancelled" and values["report"]["feedback"] == "Not this week"
    assert values["messages"][-1].content == "The plan was cancelled at the approval: Not this week"
    assert [e["type"] for e in events] == ["plan_cancelled", "run_finished"]
    assert world.executions == {}
    assert graph.get_state(cfg("plain")).next == ()
    saver.conn.close()


def test_the_docs_example_of_plan_mode_as_a_tool_runs(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "python-api.md").read_text(encoding="utf-8")
    section = readme.split("## Plan mode as a tool\n", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    for _ in range(2):  # twice on one database: the example is safe to run again
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("Plan mode finished: completed.")
        assert "refused: 'send_email' changes things and the agent is in plan mode" in proc.stdout


def test_a_tool_of_the_plan_that_asks_the_human_pauses_the_parent_and_resumes(tmp_path: Path) -> None:
    """An interrupt() in one of planmode's own tools, while the approved plan runs inside the parent's tool call,
    reaches the parent's caller; the answer resumes it without repeating the tool that ran before it."""
    bumps: list[int] = []

    @tool
    def bump() -> str:
        """Count (changes things)."""
        bumps.append(1)
        return "bumped"

    @tool
    def ask_human(question: str) -> str:
        """Ask the human."""
        return str(interrupt({"type": "question", "question": question}))

    def execute(req: ScriptRequest) -> Any:
        done = req.tool_results()
        if not done:
            return {"tool_calls": [tool_call("bump")]}
        if len(done) == 1:
            return {"tool_calls": [tool_call("ask_human", question="Which colour?")]}
        return f"painted {done[-1].content}"

    planner = ScriptedChatModel(
        responder=PurposeScript(
            plan={
                "title": "Paint",
                "steps": [{"id": "paint", "description": "Paint the wall", "tools": ["bump", "ask_human"]}],
            },
            execute=execute,
        )
    )
    parent = Parent([tool_call("plan_mode", task="Paint the wall")])
    saver = sqlite_checkpointer(tmp_path / "parent.sqlite")
    try:
        agent = create_agent(
            ScriptedChatModel(responder=parent),
            [],
            checkpointer=saver,
            middleware=[PlanModeMiddleware(planner, tools=[bump, ask_human])],
        )
        agent.invoke({"messages": [HumanMessage("Paint the wall")]}, cfg())
        out = _resume_approved(agent)
        (question,) = out["__interrupt__"]
        assert question.value == {"type": "question", "question": "Which colour?"}
        out = agent.invoke(Command(resume="red"), cfg())
    finally:
        saver.conn.close()
    (report,) = tool_messages(out, "plan_mode")
    assert "- paint [done]: Paint the wall — painted red" in report.content
    assert len(bumps) == 1 and planner.calls("execute") == 3


# -- an approval policy given to the tool or the middleware ---------------------------------------------------


@pytest.mark.parametrize("where", ["as_tool", "PlanModeMiddleware"])
@pytest.mark.parametrize("verdict", ["approve", "reject"])
def test_an_approval_policy_given_to_the_tool_decides_inside_the_parent(
    db: Path, savers: list[SqliteSaver], where: str, verdict: str
) -> None:
    """``as_tool(..., approval_policy=...)`` and ``PlanModeMiddleware(..., approval_policy=...)``: the policy
    answers the approval inside the parent agent (no interrupt reaches it), its decision is in the tool's
    result, and a rejected plan runs nothing."""
    from planmode.approval.policy import auto_approve, reject

    def policy(request: Any) -> Any:
        return auto_approve(request) if verdict == "approve" else reject("the release is frozen")

    world = World()
    parent = Parent([tool_call("plan_mode", task=TASK)])
    planner = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    saver = sqlite_checkpointer(db)
    savers.append(saver)
    if where == "as_tool":
        plan_mode = as_tool(planner, executor=world.execute, approval_policy=policy)
        agent = create_agent(
            ScriptedChatModel(responder=parent),
            world.parent_tools(),
            checkpointer=saver,
            middleware=[PlanModeMiddleware(tool=plan_mode)],
        )
    else:
        middleware = PlanModeMiddleware(planner, executor=world.execute, approval_policy=policy)
        agent = create_agent(
            ScriptedChatModel(responder=parent), world.parent_tools(), checkpointer=saver, middleware=[middleware]
        )

    out = agent.invoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())

    assert not agent.get_state(cfg()).interrupts
    (result,) = tool_messages(out, "plan_mode")
    artifact = result.artifact
    if verdict == "approve":
        assert artifact["status"] == "completed"
        assert world.executions == {"changelog": 1, "notes": 1}
    else:
        assert artifact["status"] == "cancelled"
        assert world.executions == {}
        assert "the release is frozen" in str(result.content)


def test_a_policy_cannot_be_given_twice() -> None:
    """A graph built already (or a tool made already) carries its policy: giving another is a clear error."""
    from planmode.approval.policy import auto_approve

    planner = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    with pytest.raises(ConfigurationError, match=r"pass approval_policy to planmode\.build_graph"):
        as_tool(graph=build_graph(planner), approval_policy=auto_approve)
    with pytest.raises(ConfigurationError, match=r"give the policy to planmode\.as_tool"):
        PlanModeMiddleware(tool=as_tool(planner), approval_policy=auto_approve)


def test_an_invalid_plan_mode_call_while_a_plan_waits_keeps_writes_refused(db: Path, savers: list[SqliteSaver]) -> None:
    # A plan waits for its approval; new input comes; the model calls plan_mode with arguments that fail
    # validation (the tool node answers with an error tool message), then a write: plan mode is still on.
    world = World()
    parent = Parent(
        [tool_call("plan_mode", task=TASK)],
        [tool_call("plan_mode", goal="not the argument plan_mode takes")],
        [tool_call("write_note", text="sneaked in")],
    )
    agent = build_parent(db, savers, parent, world, kind="create_agent")
    agent.invoke({"messages": [HumanMessage("Please ship the release.")]}, cfg())
    the_interrupt(agent)

    out = agent.invoke({"messages": [HumanMessage("Never mind, just write a note.")]}, cfg())

    invalid = tool_messages(out, "plan_mode")[-1]
    assert invalid.status == "error"  # the validation error, not a report
    assert world.notes == []
    (refused,) = tool_messages(out, "write_note")
    assert refused.status == "error" and "plan mode" in str(refused.content)
    assert in_plan_mode(out["messages"][:-1], ["plan_mode"])
