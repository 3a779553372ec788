"""The default executor's and the planner's tool loop run tools the way LangGraph does (its ToolNode), on a real
SQLite file: a tool's ``interrupt()`` pauses the run and resumes with the human's answer, a tool may return a
``Command``, tool errors behave as in any ToolNode, and tools that change the world are refused before approval
whatever the model sends as tool-call ids."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command, interrupt

from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest, tool_call
from planmode.tools import read_only

pytestmark = pytest.mark.integration

PLAN = {
    "title": "colours",
    "steps": [
        {"id": "a", "description": "count things"},
        # a step with tools that change the world carries acceptance (issue 24: a plan without it is sent back)
        {
            "id": "c",
            "description": "ask for a colour",
            "tools": ["bump", "ask_human"],
            "acceptance": "a colour is chosen",
        },
        {"id": "b", "description": "paint", "dependencies": ["a", "c"]},
    ],
}
AUTO = {"mode": "plan", "approval": "auto", "max_attempts": 1}


class World:
    """What the tools did."""

    def __init__(self) -> None:
        self.bumps = 0
        self.writes: list[str] = []
        self.questions: list[str] = []

    def tools(self) -> list[Any]:
        @tool
        def bump() -> str:
            """Count something (changes the world)."""
            self.bumps += 1
            return f"bumped to {self.bumps}"

        @tool
        def ask_human(question: str) -> str:
            """Ask the human a question and wait for the answer."""
            self.questions.append(question)
            return str(interrupt({"type": "question", "question": question}))

        @tool
        def write(text: str) -> str:
            """Write text somewhere (changes the world)."""
            self.writes.append(text)
            return "written"

        @tool
        def look() -> str:
            """Look around (read-only)."""
            return "a quiet room"

        @tool
        def record(text: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
            """Record text through a Command (changes the world)."""
            self.writes.append(text)
            message = ToolMessage(f"recorded {text!r} by command", tool_call_id=tool_call_id)
            return Command(update={"messages": [message]})

        @tool
        def explode() -> str:
            """Fail."""
            raise RuntimeError("the disk is on fire")

        return [bump, ask_human, write, read_only(look), record, explode]


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[SqliteSaver]:
    s = sqlite_checkpointer(tmp_path / "loop.sqlite")
    yield s
    s.conn.close()


def cfg() -> Any:
    return {"configurable": {"thread_id": "t"}}


def test_a_tool_that_interrupts_pauses_the_step_and_resumes_with_the_answer(saver: SqliteSaver) -> None:
    world = World()

    def execute(req: ScriptRequest) -> Any:
        done = req.tool_results()
        if req.step_id == "c":
            if not done:
                return {"tool_calls": [tool_call("bump")]}
            if len(done) == 1:
                return {"tool_calls": [tool_call("ask_human", question="Which colour?")]}
            return f"the human chose {done[-1].content}"
        if req.step_id == "b":
            return "painted " + req.text().split("the human chose ")[-1].split("\n")[0]
        return "counted"

    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, execute=execute))
    graph = build_graph(model, tools=world.tools(), checkpointer=saver)

    out = graph.invoke({"task": "paint the room"}, cfg(), context=AUTO)

    (question,) = out["__interrupt__"]
    assert question.value == {"type": "question", "question": "Which colour?"}
    state = graph.get_state(cfg())
    assert state.next == ("execute_step",)
    assert state.values["status"] == "running"
    assert world.bumps == 1
    assert model.calls("execute", "a") == 1 and model.calls("execute", "c") == 2

    out = graph.invoke(Command(resume="blue"), cfg())

    assert out["status"] == "completed", out.get("error")
    plan = out["plan"]
    assert plan.get("c").result == "the human chose blue"
    assert plan.get("b").result == "painted blue"
    assert [s.attempts for s in plan.steps] == [1, 1, 1]
    assert world.bumps == 1  # the tool before the interrupt did not run again
    assert world.questions == ["Which colour?", "Which colour?"]  # the interrupting tool re-ran to take the answer
    # Done steps and model turns were not repeated: a ran once; c's loop resumed from its own checkpoint.
    assert model.calls("execute", "a") == 1 and model.calls("execute", "c") == 3 and model.calls("execute", "b") == 1


def test_a_tool_may_return_a_command(saver: SqliteSaver) -> None:
    world = World()

    def execute(req: ScriptRequest) -> Any:
        done = req.tool_results()
        if not done:
            return {"tool_calls": [tool_call("record", text="blue")]}
        return f"result: {done[-1].content}"

    step = {"id": "a", "description": "record the colour", "tools": ["record"], "acceptance": "it is recorded"}
    plan = {"title": "one", "steps": [step]}
    model = ScriptedChatModel(responder=PurposeScript(plan=plan, execute=execute))
    out = build_graph(model, tools=world.tools(), checkpointer=saver).invoke({"task": "record"}, cfg(), context=AUTO)

    assert out["status"] == "completed", out.get("error")
    assert out["plan"].get("a").result == "result: recorded 'blue' by command"
    assert world.writes == ["blue"]


def test_tool_errors_behave_as_in_a_tool_node(saver: SqliteSaver) -> None:
    world = World()
    seen: list[str] = []

    def execute(req: ScriptRequest) -> Any:
        done = req.tool_results()
        if req.step_id == "a":
            if not done:
                return {"tool_calls": [tool_call("write", wrong_argument=1), tool_call("nonexistent")]}
            if len(done) == 2:  # it recovers by calling the tool properly (issue 24: a write step must write)
                seen.extend(str(m.content) for m in done)
                return {"tool_calls": [tool_call("write", text="fixed")]}
            return "recovered"
        return {"tool_calls": [tool_call("explode")]}

    plan = {
        "title": "two",
        "steps": [
            {"id": "a", "description": "bad arguments", "tools": ["write"], "acceptance": "the text is written"},
            {"id": "b", "description": "raise", "tools": ["explode"], "dependencies": ["a"], "acceptance": "done"},
        ],
    }
    model = ScriptedChatModel(responder=PurposeScript(plan=plan, execute=execute, reflect={"assessment": "failed"}))
    out = build_graph(model, tools=world.tools(), checkpointer=saver).invoke({"task": "x"}, cfg(), context=AUTO)

    # Invalid arguments and an unknown tool come back to the model as error tool messages; it recovers.
    assert out["plan"].get("a").status.value == "done" and world.writes == ["fixed"]
    assert "Error invoking tool 'write'" in seen[0] and "text: Field required" in seen[0]
    assert "nonexistent is not a valid tool" in seen[1]
    # A tool that raises fails the attempt with the tool's name and error; the thread stays readable.
    b = out["plan"].get("b")
    assert b.status.value == "failed"
    assert b.error == "tool 'explode' raised RuntimeError: the disk is on fire"
    assert graph_state_is_readable(saver)


def graph_state_is_readable(saver: SqliteSaver) -> bool:
    return saver.get_tuple(cfg()) is not None


@pytest.mark.parametrize("ids", ["reused", "empty", "duplicate"])
def test_writes_are_refused_before_approval_whatever_the_tool_call_ids(saver: SqliteSaver, ids: str) -> None:
    """While the planner explores (before approval) only read-only tools run; ids from the model play no part."""
    world = World()
    call_ids = {"reused": ["c1", "c1", "c1"], "empty": ["", "", ""], "duplicate": ["x", "x", "x"]}[ids]

    def explore(req: ScriptRequest) -> Any:
        if not req.tool_results():
            names = [("look", {}), ("write", {"text": "too early"}), ("record", {"text": "too early"})]
            calls = [
                {"name": n, "args": a, "id": i, "type": "tool_call"} for (n, a), i in zip(names, call_ids, strict=True)
            ]
            return AIMessage(content="", tool_calls=calls)
        return "explored: " + " | ".join(str(m.content) for m in req.tool_results())

    # a description that is only a tool's name is sent back (issue 24): the step says what it does
    plan = {"title": "one", "steps": [{"id": "a", "description": "write the note"}]}
    model = ScriptedChatModel(responder=PurposeScript(plan=plan, explore=explore))
    graph = build_graph(model, tools=world.tools(), checkpointer=saver)
    out = graph.invoke({"task": "write a note"}, cfg(), context={"mode": "plan"})

    assert out["__interrupt__"][0].value["type"] == "planmode.approval"
    assert world.writes == []
    plan_request = next(r for r in model.requests if r.purpose == "plan")
    assert "a quiet room" in plan_request.text()
    # the explorer is shown only the read-only tool; the calls to the others come back as errors and run nothing
    explore_requests = [r for r in model.requests if r.purpose == "explore"]
    assert explore_requests and all([t["function"]["name"] for t in r.tools] == ["look"] for r in explore_requests), [
        r.tools for r in explore_requests
    ]
    assert plan_request.text().count("is not a valid tool, try one of [look]") == 2


def test_an_interrupt_while_exploring_pauses_the_planner(saver: SqliteSaver) -> None:
    world = World()
    tools = world.tools()
    ask = read_only(next(t for t in tools if t.name == "ask_human"))

    def explore(req: ScriptRequest) -> Any:
        if not req.tool_results():
            return {"tool_calls": [tool_call("ask_human", question="Which room?")]}
        return f"the human said {req.tool_results()[-1].content}"

    plan = {"title": "one", "steps": [{"id": "a", "description": "paint"}]}
    model = ScriptedChatModel(responder=PurposeScript(plan=plan, explore=explore))
    graph = build_graph(model, tools=[ask], checkpointer=saver)

    out = graph.invoke({"task": "paint a room"}, cfg(), context={"mode": "plan"})
    assert out["__interrupt__"][0].value == {"type": "question", "question": "Which room?"}
    out = graph.invoke(Command(resume="the kitchen"), cfg())

    approval = out["__interrupt__"][0].value
    assert approval["type"] == "planmode.approval"
    assert "the human said the kitchen" in next(r for r in model.requests if r.purpose == "plan").text()
    assert model.calls("explore") == 2  # the first explore turn was not repeated on resume


def test_an_interrupt_on_the_direct_path_pauses_and_resumes(saver: SqliteSaver) -> None:
    world = World()

    def respond(req: ScriptRequest) -> Any:
        if not req.tool_results():
            return {"tool_calls": [tool_call("ask_human", question="Which colour?"), tool_call("look")]}
        return "You chose " + " and ".join(str(m.content) for m in req.tool_results())

    model = ScriptedChatModel(responder=PurposeScript(respond=respond))
    tools = world.tools()
    read_only(next(t for t in tools if t.name == "ask_human"))  # asking changes nothing: allowed without a plan
    graph = build_graph(model, tools=tools, checkpointer=saver)
    out = graph.invoke({"task": "what colour?"}, cfg(), context={"mode": "direct"})
    assert out["__interrupt__"][0].value == {"type": "question", "question": "Which colour?"}

    out = graph.invoke(Command(resume="green"), cfg())
    assert out["status"] == "answered"
    assert out["messages"][-1].content == "You chose green and a quiet room"
    assert model.calls("respond") == 2
