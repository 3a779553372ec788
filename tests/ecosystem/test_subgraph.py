"""planmode embedded as a node of a parent graph (``examples/parent_agent.py``), on a real SQLite file.

The parent's checkpointer keeps the subgraph's checkpoints; ``get_state(subgraphs=True)`` shows them; the
approval interrupt surfaces at the parent and is answered through it; messages are neither lost nor
duplicated; rolling the parent thread back brings the subgraph's plan back as it was.
"""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from planmode.persistence import sqlite_checkpointer
from planmode.state import Plan, StepStatus
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "parent_agent.py"

TASK = "Plan the release: collect the changelog, then write the notes and update the docs, finally publish it."
PLAN = {
    "title": "Release",
    "steps": [
        {"id": "changelog", "description": "Collect the changelog"},
        {"id": "notes", "description": "Write the release notes", "dependencies": ["changelog"]},
        {"id": "docs", "description": "Update the docs", "dependencies": ["changelog"]},
        {"id": "publish", "description": "Publish the release", "dependencies": ["notes", "docs"]},
    ],
}
SECOND_PLAN = {
    "title": "Follow-up",
    "steps": [
        {"id": "survey", "description": "Survey the users"},
        {"id": "report", "description": "Report the results", "dependencies": ["survey"]},
    ],
}
ADD_ANNOUNCE = {
    "action": "edit",
    "patch": {
        "reason": "tell people",
        "add_steps": [{"id": "announce", "description": "Announce the release", "dependencies": ["publish"]}],
    },
}
FIRST_STEPS = ["changelog", "notes", "docs", "publish"]


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("parent_agent_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


parent_agent = _load_example()


@pytest.fixture
def open_db(tmp_path: Path) -> Iterator[Callable[[], SqliteSaver]]:
    """Opens the test's SQLite file (a new connection each call, like a new process); closes them all after."""
    opened: list[SqliteSaver] = []

    def open_() -> SqliteSaver:
        opened.append(sqlite_checkpointer(tmp_path / "parent.sqlite"))
        return opened[-1]

    yield open_
    for saver in opened:
        saver.conn.close()


def _model(*plans: dict[str, Any]) -> ScriptedChatModel:
    return ScriptedChatModel(responder=PurposeScript(plan=list(plans or [PLAN])))


def _config(thread_id: str = "parent-thread") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _statuses(plan: Plan) -> dict[str, str]:
    return {s.id: s.status.value for s in plan.steps}


def _assert_no_duplicates(messages: list[Any]) -> None:
    ids = [m.id for m in messages]
    assert None not in ids and len(ids) == len(set(ids)), ids
    human = [m.content for m in messages if isinstance(m, HumanMessage)]
    assert len(human) == len(set(human)), human


def test_the_parents_sqlite_checkpointer_keeps_the_subgraph_and_resumes_through_the_parent(
    tmp_path: Path, open_db: Callable[[], SqliteSaver]
) -> None:
    model = _model(PLAN, SECOND_PLAN)
    parent = parent_agent.build_parent(model, checkpointer=open_db())
    cfg = _config()

    out = parent.invoke({"messages": [HumanMessage(TASK)]}, cfg)

    # The approval interrupt surfaces at the parent, with planmode's payload.
    (interrupt,) = out["__interrupt__"]
    assert interrupt.value["type"] == "planmode.approval"
    assert [s["id"] for s in interrupt.value["plan"]["steps"]] == FIRST_STEPS

    # A new process (a fresh connection to the same file) sees the subgraph's state through the parent.
    parent = parent_agent.build_parent(model, checkpointer=open_db())
    state = parent.get_state(cfg, subgraphs=True)
    assert state.next == ("planmode",)
    (task,) = state.tasks
    assert task.name == "planmode"
    assert [i.value["revision"] for i in task.interrupts] == [interrupt.value["revision"]]
    sub = task.state
    assert sub is not None and not isinstance(sub, dict)
    assert sub.next == ("approve",)
    assert sub.config["configurable"]["checkpoint_ns"].startswith("planmode:")
    assert sub.values["status"] == "awaiting_approval"
    plan = sub.values["plan"]
    assert isinstance(plan, Plan) and plan.version == 1 and plan.ids() == FIRST_STEPS
    assert plan.revision == interrupt.value["revision"]
    with closing(sqlite3.connect(tmp_path / "parent.sqlite")) as conn:
        namespaces = {ns for (ns,) in conn.execute("SELECT DISTINCT checkpoint_ns FROM checkpoints")}
    assert "" in namespaces and any(ns.startswith("planmode:") for ns in namespaces)

    # Resume through the parent with an edit that adds a step.
    out = parent.invoke(Command(resume={**ADD_ANNOUNCE, "revision": interrupt.value["revision"]}), cfg)
    assert "__interrupt__" not in out
    assert out["status"] == "completed"
    assert out["plan"].version == 2
    assert _statuses(out["plan"]) == dict.fromkeys([*FIRST_STEPS, "announce"], "done")
    messages = out["messages"]
    assert [(m.type, m.name) for m in messages] == [("human", None), ("ai", "planmode"), ("ai", "summarize")]
    assert messages[0].content == TASK
    assert "5 step(s) done" in messages[2].content
    _assert_no_duplicates(messages)
    assert parent.get_state(cfg, subgraphs=True).tasks == ()

    # A second request on the same thread: planmode runs again; the conversation grows by exactly its turn.
    out = parent.invoke({"messages": [HumanMessage("Next, survey the users and then report the results.")]}, cfg)
    (interrupt,) = out["__interrupt__"]
    assert [s["id"] for s in interrupt.value["plan"]["steps"]] == ["survey", "report"]
    out = parent.invoke(Command(resume={"action": "approve", "revision": interrupt.value["revision"]}), cfg)
    assert out["status"] == "completed"
    assert _statuses(out["plan"]) == {"survey": "done", "report": "done"}
    assert [m.type for m in out["messages"]] == ["human", "ai", "ai", "human", "ai", "ai"]
    assert out["messages"][:3] == messages
    _assert_no_duplicates(out["messages"])


def test_rolling_the_parent_thread_back_brings_the_subgraphs_plan_back(open_db: Callable[[], SqliteSaver]) -> None:
    model = _model()
    parent = parent_agent.build_parent(model, checkpointer=open_db())
    cfg = _config()
    out = parent.invoke({"messages": [HumanMessage(TASK)]}, cfg)
    shown = out["__interrupt__"][0].value
    out = parent.invoke(Command(resume={**ADD_ANNOUNCE, "revision": shown["revision"]}), cfg)
    assert out["plan"].ids() == [*FIRST_STEPS, "announce"]
    edited = parent.get_state(cfg)
    history = list(parent.get_state_history(cfg))

    # The parent checkpoint planmode ran from (and was interrupted at): roll back to it.
    (before,) = [h for h in history if h.next == ("planmode",)]
    assert before.values.get("plan") is None
    assert [t.interrupts[0].value["revision"] for t in before.tasks] == [shown["revision"]]
    plans_asked = model.calls("plan")
    out = parent.invoke(None, before.config)

    # The approval is asked again, for the plan as it was, and the subgraph's state is that plan.
    (interrupt,) = out["__interrupt__"]
    assert interrupt.value["revision"] == shown["revision"]
    # (The parent has no checkpoint inside the subgraph's run: replay re-runs planmode from its start, so the
    # planner is asked again — the scripted one answers the same plan.)
    assert model.calls("plan") == plans_asked + 1
    state = parent.get_state(cfg, subgraphs=True)
    assert state.next == ("planmode",)
    sub = state.tasks[0].state
    assert sub is not None and not isinstance(sub, dict)
    plan = sub.values["plan"]
    assert plan.version == 1 and plan.ids() == FIRST_STEPS and plan.revision == shown["revision"]
    assert all(s.status is StepStatus.PENDING for s in plan.steps)
    assert [m.type for m in state.values["messages"]] == ["human"]

    # The run goes on from there, differently: a plain approval this time.
    out = parent.invoke(Command(resume={"action": "approve", "revision": shown["revision"]}), cfg)
    assert out["status"] == "completed"
    assert _statuses(out["plan"]) == dict.fromkeys(FIRST_STEPS, "done")
    assert [(m.type, m.name) for m in out["messages"]] == [("human", None), ("ai", "planmode"), ("ai", "summarize")]
    _assert_no_duplicates(out["messages"])

    # Nothing was deleted: the edited branch is still in the history and readable.
    assert len(list(parent.get_state_history(cfg))) > len(history)
    assert parent.get_state(edited.config).values["plan"].ids() == [*FIRST_STEPS, "announce"]


def test_triage_skips_plan_mode_when_there_is_no_request() -> None:
    parent = parent_agent.build_parent(_model())
    out = parent.invoke({"messages": [AIMessage("Hello! What shall we do?")]})
    assert out["messages"][-1].content == "Nothing to do: send a request."
    assert "plan" not in out


def test_the_module_level_graph_needs_no_model_or_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    module = _load_example()
    assert module.graph.checkpointer is None  # the LangGraph server brings its own
    assert set(module.graph.get_graph().nodes) >= {"triage", "planmode", "summarize"}


def test_the_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    parent_agent._demo()
    printed = capsys.readouterr().out
    assert "# Release" in printed
    assert printed.rstrip().splitlines()[-1].startswith("ai: Plan mode finished (completed): 3 step(s) done")
