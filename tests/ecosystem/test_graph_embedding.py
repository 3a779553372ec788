"""The planmode graph as a node of a parent graph with a ``messages`` key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

TASK = "Tidy the repository: delete the build folder, then update the changelog, then tag a release"
PLAN = {
    "title": "Tidy",
    "steps": [
        {"id": "clean", "description": "delete the build folder"},
        {"id": "changelog", "description": "update the changelog"},
        {"id": "tag", "description": "tag a release", "dependencies": ["clean", "changelog"]},
    ],
}


def test_planmode_as_a_subgraph_interrupts_through_the_parent_and_keeps_messages_intact(
    checkpointer: SqliteSaver,
) -> None:
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN, final="Repository tidied and tagged."))
    runs: list[str] = []

    def executor(step: Any, ctx: Any) -> str:
        runs.append(step.id)
        return f"{step.id} ok"

    def greet(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content="Let me plan that.", id="greeting")]}

    parent = StateGraph(MessagesState)
    parent.add_node("greet", greet)
    parent.add_node("planmode", build_graph(model, executor=executor))  # no checkpointer of its own
    parent.add_edge(START, "greet")
    parent.add_edge("greet", "planmode")
    parent.add_edge("planmode", END)
    app = parent.compile(checkpointer=checkpointer)
    config = {"configurable": {"thread_id": "parent-1"}}

    app.invoke({"messages": [HumanMessage(content=TASK, id="task")]}, config)

    state = app.get_state(config)
    assert state.next == ("planmode",)
    [interrupt] = state.interrupts  # the subgraph's approval interrupt reaches the parent
    assert interrupt.value["type"] == "planmode.approval"
    assert [s["id"] for s in interrupt.value["plan"]["steps"]] == ["clean", "changelog", "tag"]
    assert runs == []

    app.invoke(Command(resume={"action": "approve", "revision": interrupt.value["revision"]}), config)

    state = app.get_state(config)
    assert state.next == () and state.interrupts == ()
    assert sorted(runs) == ["changelog", "clean", "tag"]
    messages = state.values["messages"]
    assert [type(m) for m in messages] == [HumanMessage, AIMessage, AIMessage]
    assert [m.content for m in messages] == [TASK, "Let me plan that.", "Repository tidied and tagged."]
    ids = [m.id for m in messages]
    assert len(set(ids)) == len(ids) and ids[:2] == ["task", "greeting"]
    assert set(state.values) == {"messages"}  # the parent only gets what its schema declares


def test_a_parent_that_copies_the_output_schema_keeps_the_finished_plan(tmp_path: Path) -> None:
    """OutputState.plan is a plain value: a parent built on it stores the plan as planmode finished it
    (a PlanChannel there would treat it as a first plan and reset every step to pending)."""
    from planmode.state.graph_state import OutputState

    model = ScriptedChatModel(
        responder=PurposeScript(
            plan={
                "title": "t",
                "steps": [
                    {"id": "a", "description": "first"},
                    {"id": "b", "description": "second", "dependencies": ["a"]},
                ],
            }
        )
    )
    parent = StateGraph(OutputState)
    parent.add_node("planmode", build_graph(model, executor=lambda s, c: "ok", verifier=lambda s, o, c: True))
    parent.add_edge(START, "planmode")
    saver = sqlite_checkpointer(tmp_path / "parent.sqlite")
    app = parent.compile(checkpointer=saver)
    cfg: Any = {"configurable": {"thread_id": "p"}}
    app.invoke({"messages": [("user", "do a then b")]}, cfg, context={"mode": "plan", "approval": "auto"})
    plan = app.get_state(cfg).values["plan"]
    assert [s.status.value for s in plan.steps] == ["done", "done"]
    assert plan.version == 1
    saver.conn.close()
