"""Execution: dependency order, real parallelism bounded by max_parallel, settings kept across the approval
interrupt, headless auto-approval, and the progress events on the custom stream."""

from __future__ import annotations

import threading
import time
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from planmode.context import PlanModeContext
from planmode.executors import StepContext
from planmode.graph import build_graph
from planmode.state.models import Step, StepStatus
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

TASK = "Build the report: gather the sales data and the cost data, then compute the margin, then write it up"


def thread(name: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def independent(n: int) -> dict[str, Any]:
    return {"title": "independent", "steps": [{"id": f"s{i}", "description": f"step {i}"} for i in range(n)]}


class Recorder:
    """An executor that records each step's execution interval and the peak number running at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0
        self.intervals: dict[str, tuple[float, float]] = {}
        self.runs: dict[str, int] = {}
        self.contexts: dict[str, dict[str, str]] = {}

    def __call__(self, step: Step, ctx: StepContext) -> str:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.runs[step.id] = self.runs.get(step.id, 0) + 1
            self.contexts[step.id] = dict(ctx.dependencies)
        start = time.monotonic()
        time.sleep(self.seconds)
        end = time.monotonic()
        with self.lock:
            self.running -= 1
            self.intervals[step.id] = (start, end)
        return f"result of {step.id}"


def approve(graph: Any, config: dict[str, Any], **kwargs: Any) -> Any:
    revision = graph.get_state(config).interrupts[0].value["revision"]
    return graph.invoke(Command(resume={"action": "approve", "revision": revision}), config, **kwargs)


def test_dependencies_are_respected_and_independent_steps_overlap(checkpointer: SqliteSaver) -> None:
    plan = {
        "title": "Report",
        "steps": [
            {"id": "sales", "description": "gather the sales data"},
            {"id": "costs", "description": "gather the cost data"},
            {"id": "margin", "description": "compute the margin", "dependencies": ["sales", "costs"]},
            {"id": "write", "description": "write the report", "dependencies": ["margin"]},
        ],
    }
    model = ScriptedChatModel(responder=PurposeScript(plan=plan))
    recorder = Recorder(0.3)
    graph = build_graph(model, executor=recorder, checkpointer=checkpointer)

    graph.invoke({"messages": [("user", TASK)]}, thread())
    assert recorder.runs == {}  # nothing runs before approval
    approve(graph, thread())

    state = graph.get_state(thread())
    assert state.values["status"] == "completed"
    assert all(s.status is StepStatus.DONE for s in state.values["plan"].steps)
    assert recorder.runs == {"sales": 1, "costs": 1, "margin": 1, "write": 1}
    iv = recorder.intervals
    assert iv["margin"][0] >= max(iv["sales"][1], iv["costs"][1])
    assert iv["write"][0] >= iv["margin"][1]
    assert max(iv["sales"][0], iv["costs"][0]) < min(iv["sales"][1], iv["costs"][1])  # they overlapped
    # each step gets its dependencies' results, and only those
    assert recorder.contexts["margin"] == {"sales": "result of sales", "costs": "result of costs"}
    assert recorder.contexts["write"] == {"margin": "result of margin"}
    assert recorder.contexts["sales"] == {}


def test_never_more_than_max_parallel_steps_at_once(checkpointer: SqliteSaver) -> None:
    model = ScriptedChatModel(responder=PurposeScript(plan=independent(4)))
    recorder = Recorder(0.2)
    graph = build_graph(model, executor=recorder, checkpointer=checkpointer)

    graph.invoke({"messages": [("user", TASK)]}, thread(), context=PlanModeContext(approval="auto", max_parallel=2))

    assert graph.get_state(thread()).values["status"] == "completed"
    assert recorder.runs == dict.fromkeys(("s0", "s1", "s2", "s3"), 1)
    assert recorder.peak == 2  # parallel, and bounded


def test_resuming_without_context_keeps_the_run_settings(checkpointer: SqliteSaver) -> None:
    model = ScriptedChatModel(responder=PurposeScript(plan=independent(3)))
    recorder = Recorder(0.15)
    graph = build_graph(model, executor=recorder, checkpointer=checkpointer)

    graph.invoke({"messages": [("user", TASK)]}, thread(), context=PlanModeContext(approval="ask", max_parallel=1))
    assert graph.get_state(thread()).interrupts  # approval="ask" was honoured
    approve(graph, thread())  # no context this time

    state = graph.get_state(thread())
    assert state.values["status"] == "completed"
    assert state.values["settings"].max_parallel == 1
    assert recorder.peak == 1  # the default (4) would have run all three at once


def test_auto_approval_runs_headless_to_completion(checkpointer: SqliteSaver) -> None:
    plan = {
        "title": "t",
        "steps": [{"id": "a", "description": "do a"}, {"id": "b", "description": "do b", "dependencies": ["a"]}],
    }
    model = ScriptedChatModel(responder=PurposeScript(plan=plan, final="All done: a and b."))
    graph = build_graph(model, executor=Recorder(0), checkpointer=checkpointer)

    chunks = list(
        graph.stream({"messages": [("user", TASK)]}, thread(), context={"approval": "auto"}, stream_mode="updates")
    )

    assert not any("__interrupt__" in chunk for chunk in chunks)
    state = graph.get_state(thread())
    assert state.next == () and state.interrupts == ()
    assert state.values["status"] == "completed"
    assert state.values["report"]["done"] == ["a", "b"]
    assert state.values["messages"][-1].content == "All done: a and b."


def test_progress_events_arrive_in_a_sensible_order(checkpointer: SqliteSaver) -> None:
    plan = {
        "title": "t",
        "steps": [
            {"id": "a", "description": "do a"},
            {"id": "b", "description": "do b"},
            {"id": "c", "description": "do c", "dependencies": ["a", "b"]},
        ],
    }
    model = ScriptedChatModel(responder=PurposeScript(plan=plan))
    graph = build_graph(model, executor=Recorder(0.05), checkpointer=checkpointer)

    events = list(graph.stream({"messages": [("user", TASK)]}, thread(), stream_mode="custom"))
    assert [e["type"] for e in events] == ["plan_created"]
    revision = graph.get_state(thread()).interrupts[0].value["revision"]
    events += graph.stream(Command(resume={"action": "approve", "revision": revision}), thread(), stream_mode="custom")

    types = [e["type"] for e in events]
    assert all(e["source"] == "planmode" for e in events)
    assert types[:2] == ["plan_created", "plan_approved"]
    assert types[-1] == "run_finished" and events[-1]["data"]["status"] == "completed"
    assert sorted(types[2:-1]) == sorted(["step_started", "step_completed"] * 3)

    def at(kind: str, step: str) -> int:
        return next(i for i, e in enumerate(events) if e["type"] == kind and e["step_id"] == step)

    for step in "abc":
        assert at("step_started", step) < at("step_completed", step)
    assert at("step_started", "c") > max(at("step_completed", "a"), at("step_completed", "b"))
    assert events[1]["data"]["revision"] == revision
