"""An unreachable model pauses the run (status ``model_unavailable``) instead of failing it, and resume can
point the run at another endpoint: over real HTTP, the real ``ChatOpenAI`` client, a real SQLite file."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command

from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.persistence.runs import list_runs
from planmode.testing.openai_server import Fault, ScriptedOpenAIServer

pytestmark = pytest.mark.integration

PLAN = {
    "title": "Three steps",
    "steps": [
        {"id": "collect", "description": "collect the numbers", "acceptance": "numbers collected"},
        {"id": "add", "description": "add them up", "dependencies": ["collect"], "acceptance": "a sum"},
        {"id": "report", "description": "report the sum", "dependencies": ["add"]},
    ],
}
CFG: Any = {"configurable": {"thread_id": "t"}}


def purpose(body: dict[str, Any]) -> str:
    first = str(body["messages"][0].get("content") or "")
    return first.split("\n", 1)[0].removeprefix("planmode:") if first.startswith("planmode:") else "unknown"


def step_of(body: dict[str, Any]) -> str | None:
    text = json.dumps(body["messages"])
    for sid in ("collect", "add", "report"):
        if f"Step `{sid}`" in text:
            return sid
    return None


class Script:
    """Answers every purpose; ``die_at`` names the step whose execution stops the server mid-request."""

    def __init__(self, die_at: str | None = None) -> None:
        self.die_at = die_at
        self.server: ScriptedOpenAIServer | None = None
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Any:
        self.bodies.append(body)
        p = purpose(body)
        if p == "execute" and step_of(body) == self.die_at and self.server is not None:
            threading.Thread(target=self.server.stop).start()  # the server dies under this very request
            return Fault(delay=30)
        value: Any = {"plan": PLAN, "verify": {"passed": True, "reason": ""}}.get(p)
        if value is None:
            return f"{p} done"
        if body.get("tool_choice") and body.get("tools"):
            return {"tool_calls": [{"name": body["tools"][0]["function"]["name"], "arguments": value}]}
        return json.dumps(value)

    def executed(self) -> list[str | None]:
        return [step_of(b) for b in self.bodies if purpose(b) == "execute"]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    yield


def start_and_kill(tmp_path: Path, **settings: Any) -> tuple[Any, Script, str]:
    """Run until the server dies while executing step `add`; return the graph, the script, the dead URL."""
    first = Script(die_at="add")
    srv = ScriptedOpenAIServer(first)
    first.server = srv
    srv.start()
    dead_url = srv.base_url
    graph = build_graph(checkpointer=sqlite_checkpointer(tmp_path / "runs.sqlite"))
    context = {
        "base_url": dead_url,
        "model": "scripted",
        "mode": "plan",
        "approval": "auto",
        "max_retries": 1,
        **settings,
    }
    try:
        graph.invoke(
            {"messages": [("user", "collect the numbers, add them up, then report the sum")]}, CFG, context=context
        )
    finally:
        srv.stop()
    return graph, first, dead_url


def assert_paused(graph: Any, dead_url: str) -> None:
    state = graph.get_state(CFG)
    values = state.values
    assert values["status"] == "model_unavailable"
    assert dead_url in values["error"]
    statuses = {s.id: s.status.value for s in values["plan"].steps}
    assert statuses == {"collect": "done", "add": "running", "report": "pending"}
    add = values["plan"].get("add")
    assert add is not None and add.attempts == 1
    assert state.next == ("model_unavailable",)
    payload = state.interrupts[0].value
    assert payload["type"] == "planmode.model_unavailable"
    assert payload["base_url"] == dead_url and payload["node"] == "execute_step" and payload["step_id"] == "add"


def test_a_server_killed_mid_run_pauses_it_and_resume_at_another_port_finishes_it(tmp_path: Path) -> None:
    graph, first, dead_url = start_and_kill(tmp_path)
    assert first.executed() == ["collect", "add"]
    assert_paused(graph, dead_url)
    runs = list_runs(graph, status="model_unavailable")  # the status is a run status of its own
    assert [r.thread_id for r in runs] == ["t"]

    second = Script()
    with ScriptedOpenAIServer(second) as srv:
        new_url = srv.base_url
        assert new_url != dead_url
        graph.invoke(Command(resume={"base_url": new_url}), CFG)
    values = graph.get_state(CFG).values
    assert values["status"] == "completed", values.get("error")
    assert second.executed() == ["add", "report"]  # the done step did not run again
    assert all(s.status.value == "done" for s in values["plan"].steps)
    assert values["plan"].get("add").attempts == 1  # the attempt the outage cut off is not counted twice
    assert values["settings"].base_url == new_url  # remembered for the rest of the run
    assert values["unavailable"] is None and values["error"] is None


def test_resume_with_a_context_naming_a_new_endpoint_goes_on_without_asking(tmp_path: Path) -> None:
    graph, _, dead_url = start_and_kill(tmp_path)
    assert_paused(graph, dead_url)
    second = Script()
    with ScriptedOpenAIServer(second) as srv:
        new_url = srv.base_url
        graph.invoke(None, CFG, context={"base_url": new_url})
    values = graph.get_state(CFG).values
    assert values["status"] == "completed", values.get("error")
    assert second.executed() == ["add", "report"]
    assert values["settings"].base_url == new_url


def test_resume_at_the_same_dead_endpoint_pauses_again_and_an_approval_answer_is_refused(tmp_path: Path) -> None:
    graph, _, dead_url = start_and_kill(tmp_path)
    graph.invoke(Command(resume={"action": "retry"}), CFG)  # try again: still nobody there
    assert_paused(graph, dead_url)
    assert graph.get_state(CFG).interrupts[0].value["answer_error"] is None
    graph.invoke(Command(resume={"action": "approve"}), CFG)  # an answer for another interrupt
    state = graph.get_state(CFG)
    assert state.values["status"] == "model_unavailable"
    assert "not an approval" in state.interrupts[0].value["answer_error"]
    graph.invoke(Command(resume={"base_url": 5}), CFG)
    assert "must be a string" in graph.get_state(CFG).interrupts[0].value["answer_error"]


def test_the_planner_losing_the_model_pauses_before_any_plan(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(lambda body: "unused") as srv:
        dead_url = srv.base_url
    graph = build_graph(checkpointer=sqlite_checkpointer(tmp_path / "runs.sqlite"))
    context = {"base_url": dead_url, "model": "scripted", "mode": "plan", "approval": "auto", "max_retries": 0}
    graph.invoke({"messages": [("user", "collect the numbers, then report the sum")]}, CFG, context=context)
    state = graph.get_state(CFG)
    assert state.values["status"] == "model_unavailable"
    assert state.values["plan"] is None or state.values["plan"].version == 0
    second = Script()
    with ScriptedOpenAIServer(second) as srv:
        graph.invoke(Command(resume={"base_url": srv.base_url, "model": "other"}), CFG)
    values = graph.get_state(CFG).values
    assert values["status"] == "completed", values.get("error")
    assert {b["model"] for b in second.bodies} == {"other"}
    assert values["settings"].model == "other"


def test_the_direct_path_pauses_and_resumes_too(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(lambda body: "unused") as srv:
        dead_url = srv.base_url
    graph = build_graph(checkpointer=sqlite_checkpointer(tmp_path / "runs.sqlite"))
    context = {"base_url": dead_url, "model": "scripted", "mode": "direct", "max_retries": 0}
    graph.invoke({"messages": [("user", "what is two plus two?")]}, CFG, context=context)
    state = graph.get_state(CFG)
    assert state.values["status"] == "model_unavailable"
    assert state.interrupts[0].value["node"] == "respond"
    with ScriptedOpenAIServer(lambda body: "four") as srv:
        graph.invoke(Command(resume={"base_url": srv.base_url}), CFG)
    values = graph.get_state(CFG).values
    assert values["status"] == "answered"
    assert values["messages"][-1].content == "four"
    assert [m.content for m in values["messages"]].count("four") == 1


def test_retry_at_the_same_endpoint_once_the_server_is_back(tmp_path: Path) -> None:
    graph, _, dead_url = start_and_kill(tmp_path)
    port = int(dead_url.rsplit(":", 1)[1].split("/", 1)[0])
    second = Script()
    with ScriptedOpenAIServer(second, port=port):
        graph.invoke(Command(resume={"action": "retry"}), CFG)
    values = graph.get_state(CFG).values
    assert values["status"] == "completed", values.get("error")
    assert second.executed() == ["add", "report"]
    assert values["settings"].base_url == dead_url


def test_any_chat_model_raising_connection_error_pauses_the_run_and_a_retry_resumes_it(tmp_path: Path) -> None:
    """Not only ChatOpenAI: a chat model passed to the builder whose call raises ConnectionError (the
    builtin: refused, reset) pauses the run; a parallel sibling step's work is kept."""
    from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest

    down = threading.Event()
    down.set()
    plan = {
        "title": "Parallel",
        "steps": [
            {"id": "left", "description": "left"},
            {"id": "right", "description": "right"},
            {"id": "join", "description": "join", "dependencies": ["left", "right"]},
        ],
    }

    def execute(req: ScriptRequest) -> Any:
        if req.step_id == "right" and down.is_set():
            raise ConnectionRefusedError("[Errno 111] Connection refused")
        return "ok"

    model = ScriptedChatModel(responder=PurposeScript(plan=plan, execute=execute))
    graph = build_graph(model, checkpointer=sqlite_checkpointer(tmp_path / "runs.sqlite"))
    graph.invoke(
        {"messages": [("user", "do left and right, then join them")]}, CFG, context={"mode": "plan", "approval": "auto"}
    )
    state = graph.get_state(CFG)
    assert state.values["status"] == "model_unavailable"
    assert "Connection refused" in state.values["error"]
    statuses = {s.id: s.status.value for s in state.values["plan"].steps}
    assert statuses == {"left": "done", "right": "running", "join": "pending"}
    down.clear()
    graph.invoke(Command(resume="retry"), CFG)
    values = graph.get_state(CFG).values
    assert values["status"] == "completed", values.get("error")
    assert (model.calls("execute", "left"), model.calls("execute", "right"), model.calls("execute", "join")) == (
        1,
        2,
        1,
    )  # the done sibling did not run again


def test_reflect_losing_the_model_pauses_and_resumes_at_reflect(tmp_path: Path) -> None:
    from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest

    down = threading.Event()
    down.set()
    plan = {"title": "One step", "steps": [{"id": "only", "description": "do it", "acceptance": "done well"}]}

    def reflect(req: ScriptRequest) -> Any:
        if down.is_set():
            raise ConnectionResetError("connection reset by peer")
        return {"assessment": "complete", "reasoning": "good enough"}

    model = ScriptedChatModel(
        responder=PurposeScript(plan=plan, verify={"passed": False, "reason": "not well"}, reflect=reflect)
    )
    graph = build_graph(model, checkpointer=sqlite_checkpointer(tmp_path / "runs.sqlite"))
    graph.invoke(
        {"messages": [("user", "do it well")]}, CFG, context={"mode": "plan", "approval": "auto", "max_attempts": 1}
    )
    state = graph.get_state(CFG)
    assert state.values["status"] == "model_unavailable"
    assert state.interrupts[0].value["node"] == "reflect"
    assert state.values["reflections"] == 0  # the lost call counted nothing
    down.clear()
    graph.invoke(Command(resume={"action": "retry"}), CFG)
    values = graph.get_state(CFG).values
    # its "complete" does not skip the step whose verification failed: the run ends failed, saying so
    assert values["status"] == "failed" and "the reflection called the run complete, but only failed" in values["error"]
    assert values["reflections"] == 1
    assert model.calls("execute") == 1


def test_parallel_steps_losing_the_model_at_once_pause_once_and_both_run_on_resume(tmp_path: Path) -> None:
    """Several execute_step tasks of one super-step may all lose the model: their writes merge (no
    InvalidUpdateError), the run pauses once, and on resume each runs again with its attempt uncounted."""
    from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest

    down = threading.Event()
    down.set()
    plan = {"title": "Wide", "steps": [{"id": f"s{i}", "description": f"part {i}"} for i in range(3)]}

    def execute(req: ScriptRequest) -> Any:
        if down.is_set():
            raise ConnectionRefusedError("[Errno 111] Connection refused")
        return "ok"

    model = ScriptedChatModel(responder=PurposeScript(plan=plan, execute=execute))
    graph = build_graph(model, checkpointer=sqlite_checkpointer(tmp_path / "runs.sqlite"))
    graph.invoke(
        {"messages": [("user", "do the three parts")]},
        CFG,
        context={"mode": "plan", "approval": "auto", "max_parallel": 3, "max_attempts": 1},
    )
    state = graph.get_state(CFG)
    assert state.values["status"] == "model_unavailable"
    assert len(state.interrupts) == 1
    assert {s.status.value for s in state.values["plan"].steps} == {"running"}
    down.clear()
    graph.invoke(Command(resume=True), CFG)
    values = graph.get_state(CFG).values
    assert values["status"] == "completed", values.get("error")
    assert all(s.attempts == 1 for s in values["plan"].steps)  # max_attempts=1 was not used up by the outage
