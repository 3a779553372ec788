"""The plan reducer inside a real compiled `StateGraph` with a real SQLite checkpointer file.

An ``update_state`` that edits a done step is rejected and recorded, ``get_state`` keeps working (also from a
new connection to the same file), and the run goes on. Also pinned here: how LangGraph 1.2 treats the first
write and ``Overwrite`` on a reducer channel, and what its serializer does with planmode's pydantic types.
"""

from __future__ import annotations

import inspect
import operator
import sqlite3
from collections.abc import Callable, Iterator
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import pytest
from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Overwrite
from pydantic import BaseModel
from typing_extensions import TypedDict

from planmode.state import Plan, StepStatus, StepTransition, plan_reducer
from planmode.state import models as state_models
from planmode.state.channel import PlanChannel
from planmode.state.reducer import PlanUpdate

pytestmark = pytest.mark.integration

S = StepStatus

PLAN = {
    "goal": "write a report",
    "title": "Report",
    "steps": [
        {"id": "fetch", "description": "Fetch the data"},
        {"id": "clean", "description": "Clean the data", "dependencies": ["fetch"]},
        {"id": "write", "description": "Write the report", "dependencies": ["clean"]},
    ],
}

#: Every planmode type that can land in a checkpoint: the models and enums of planmode.state.models, and the
#: reducer's envelope. Computed, so a new model is covered without editing this list.
ALLOWLIST = sorted(
    {
        (state_models.__name__, name)
        for name, obj in vars(state_models).items()
        if inspect.isclass(obj) and obj.__module__ == state_models.__name__ and issubclass(obj, BaseModel | Enum)
    }
    | {(PlanUpdate.__module__, PlanUpdate.__name__)}
)


class ReducerState(TypedDict, total=False):
    plan: Annotated[Plan | None, plan_reducer]
    ran: Annotated[list[str], operator.add]


class ChannelState(TypedDict, total=False):
    plan: Annotated[Plan | None, PlanChannel]
    ran: Annotated[list[str], operator.add]


def plan_node(state: dict[str, Any]) -> dict[str, Any]:
    """Writes the first plan (a JSON dict, as a model would produce it) when there is none yet."""
    plan = state.get("plan")
    if isinstance(plan, Plan) and plan.version > 0:
        return {}
    return {"plan": PLAN}


def work_node(state: dict[str, Any]) -> dict[str, Any]:
    """Runs the first ready step: running, then done, through `StepTransition` writes."""
    plan = state["plan"]
    assert isinstance(plan, Plan), f"the plan reached a node as {type(plan).__name__}"
    ready = plan.ready_steps()
    if not ready:
        return {}
    step = ready[0]
    return {
        "plan": [
            StepTransition(id=step.id, status=S.RUNNING, attempts=step.attempts + 1),
            StepTransition(id=step.id, status=S.DONE, result=f"{step.id} ok"),
        ],
        "ran": [step.id],
    }


def build(schema: type, saver: SqliteSaver) -> Any:
    g = StateGraph(schema)
    g.add_node("plan", plan_node)
    g.add_node("work", work_node)
    g.add_edge(START, "plan")
    g.add_edge("plan", "work")
    g.add_edge("work", END)
    return g.compile(checkpointer=saver)


@pytest.fixture
def open_saver(tmp_path: Path) -> Iterator[Callable[..., SqliteSaver]]:
    """Opens `SqliteSaver`s on one database file, each on its own connection; closes them all afterwards."""
    conns: list[sqlite3.Connection] = []
    path = tmp_path / "checkpoints.sqlite"

    def open_(serde: JsonPlusSerializer | None = None) -> SqliteSaver:
        conn = sqlite3.connect(str(path), check_same_thread=False)
        conns.append(conn)
        return SqliteSaver(conn, serde=serde) if serde is not None else SqliteSaver(conn)

    yield open_
    for conn in conns:
        conn.close()


@pytest.fixture
def serde_events() -> Iterator[list[dict[str, Any]]]:
    """Every allowlist event LangGraph's serializer emits while the test runs (planmode types only)."""
    events: list[dict[str, Any]] = []

    def listen(event: Any) -> None:
        if str(event.get("module", "")).startswith("planmode"):
            events.append(dict(event))

    unregister = register_serde_event_listener(listen)
    yield events
    unregister()


def allowlisted() -> JsonPlusSerializer:
    return JsonPlusSerializer(allowed_msgpack_modules=ALLOWLIST)


def plan_of(graph: Any, config: dict[str, Any]) -> Plan:
    value = graph.get_state(config).values["plan"]
    assert isinstance(value, Plan), f"restored plan is a {type(value).__name__}"
    return value


# -- the main scenario -------------------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [ReducerState, ChannelState], ids=["plan_reducer", "PlanChannel"])
def test_done_step_edit_via_update_state_is_rejected_and_the_run_goes_on(
    schema: type, open_saver: Callable[..., SqliteSaver], serde_events: list[dict[str, Any]]
) -> None:
    graph = build(schema, open_saver(allowlisted()))
    config = {"configurable": {"thread_id": "t1"}}

    # ``plan: None`` in the input gives the plain reducer channel a value, so the planner's write is reduced
    out = graph.invoke({"plan": None}, config)
    assert out["ran"] == ["fetch"]
    plan = plan_of(graph, config)
    assert plan.version == 1 and plan.history[0].reason == "initial plan"
    fetch = plan.get("fetch")
    assert fetch is not None and (fetch.status, fetch.result, fetch.attempts) == (S.DONE, "fetch ok", 1)

    # a human edits the done step through update_state: rejected, recorded, nothing else changes
    graph.update_state(config, {"plan": {"update_steps": [{"id": "fetch", "description": "Fetch other data"}]}})
    after = plan_of(graph, config)
    assert after.steps == plan.steps and after.version == plan.version
    assert len(after.rejections) == 1
    assert after.rejections[0].kind == "patch"
    assert any("'fetch' is done and cannot be modified" in r for r in after.rejections[0].reasons)

    # other ways to touch a done step are refused the same way
    graph.update_state(config, {"plan": {"remove_steps": ["fetch"]}})
    graph.update_state(config, {"plan": {"id": "fetch", "status": "pending"}})
    graph.update_state(
        config, {"plan": {**PLAN, "steps": [{**PLAN["steps"][0], "description": "x"}, *PLAN["steps"][1:]]}}
    )
    graph.update_state(config, {"plan": "not a plan at all"})
    after = plan_of(graph, config)
    assert after.steps == plan.steps and after.version == plan.version
    assert [r.kind for r in after.rejections] == ["patch", "patch", "transition", "plan", "unknown"]

    # every checkpoint of the thread is readable
    history = list(graph.get_state_history(config))
    assert len(history) >= 8
    for snapshot in history:
        assert snapshot.values.get("plan") is None or isinstance(snapshot.values["plan"], Plan)

    # a new connection to the same file reads the same state
    reopened = build(schema, open_saver(allowlisted()))
    assert plan_of(reopened, config) == after

    # the run goes on: a valid human patch applies, and further invocations execute the remaining steps
    reopened.update_state(
        config,
        {
            "plan": {
                "reason": "human",
                "add_steps": [{"id": "review", "description": "Review the report", "dependencies": ["write"]}],
            }
        },
    )
    patched = plan_of(reopened, config)
    assert patched.version == 2 and patched.ids() == ["fetch", "clean", "write", "review"]
    assert patched.get("fetch") == plan.get("fetch")
    for expected in ("clean", "write", "review"):
        out = reopened.invoke({"plan": None}, config)
        assert out["ran"][-1] == expected
    final = plan_of(reopened, config)
    assert final.is_complete and final.version == 2
    assert [s.result for s in final.steps] == ["fetch ok", "clean ok", "write ok", "review ok"]

    # with planmode's types allowlisted the serializer neither warns about nor blocks any of them
    assert serde_events == []


# -- the serializer -----------------------------------------------------------------------------------------


def test_default_serializer_restores_the_plan_channel_without_unregistered_type_events(
    open_saver: Callable[..., SqliteSaver], serde_events: list[dict[str, Any]]
) -> None:
    graph = build(ChannelState, open_saver())
    config = {"configurable": {"thread_id": "t-default"}}
    graph.invoke({}, config)
    reopened = build(ChannelState, open_saver())
    plan = plan_of(reopened, config)
    assert plan.get("fetch").status is S.DONE  # type: ignore[union-attr]
    assert isinstance(plan.steps[0].status, StepStatus)
    # `PlanChannel` checkpoints the plan as JSON data: LangGraph's serializer (which allows unregistered types
    # by default but reports them, and says it will block them in a future version) has no Plan to report.
    assert serde_events == []


def test_strict_serializer_without_an_allowlist_restores_the_plan_and_the_reducer_protects_it(
    open_saver: Callable[..., SqliteSaver], serde_events: list[dict[str, Any]]
) -> None:
    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    graph = build(ChannelState, open_saver(strict))
    config = {"configurable": {"thread_id": "t-strict"}}
    graph.invoke({}, config)
    reopened = build(ChannelState, open_saver(JsonPlusSerializer(allowed_msgpack_modules=None)))
    plan = plan_of(reopened, config)  # the channel rebuilds the Plan from its checkpointed data
    assert ("msgpack_blocked", "Plan") not in {(e["kind"], e["name"]) for e in serde_events}
    # the done step is still protected
    reopened.update_state(config, {"plan": {"update_steps": [{"id": "fetch", "description": "changed"}]}})
    rejected = plan_of(reopened, config)
    assert rejected.steps == plan.steps
    assert rejected.get("fetch").status is S.DONE  # type: ignore[union-attr]
    assert rejected.get("fetch").description == "Fetch the data"  # type: ignore[union-attr]
    assert "'fetch' is done" in rejected.rejections[-1].reasons[0]


# -- LangGraph's reducer-channel semantics ----------------------------------------------------------------------


BAD_FIRST_PLAN = {
    "goal": "g",
    "steps": [
        {"id": "a", "description": "A", "dependencies": ["b"]},
        {"id": "b", "description": "B", "dependencies": ["a"]},
    ],
}


def _first_write_graph(schema: type, saver: SqliteSaver) -> Any:
    def planner(state: dict[str, Any]) -> dict[str, Any]:
        return {"plan": BAD_FIRST_PLAN}

    g = StateGraph(schema)
    g.add_node("planner", planner)
    g.add_edge(START, "planner")
    g.add_edge("planner", END)
    return g.compile(checkpointer=saver)


def test_first_write_to_a_plain_reducer_channel_skips_the_reducer(open_saver: Callable[..., SqliteSaver]) -> None:
    # LangGraph 1.2 stores the first write to an empty ``Plan | None`` reducer channel as it is. The plan
    # reducer validates such a raw value at the next write; `PlanChannel` validates it at once.
    graph = _first_write_graph(ReducerState, open_saver(allowlisted()))
    config = {"configurable": {"thread_id": "t-first"}}
    graph.invoke({}, config)
    assert graph.get_state(config).values["plan"] == BAD_FIRST_PLAN  # stored raw, unvalidated
    graph.update_state(config, {"plan": {"id": "a", "status": "running"}})
    plan = plan_of(graph, config)
    assert plan.version == 0 and plan.steps == []
    assert [r.kind for r in plan.rejections] == ["plan", "transition"]
    assert any("dependency cycle" in r for r in plan.rejections[0].reasons)


def test_plan_channel_reduces_the_first_write(open_saver: Callable[..., SqliteSaver]) -> None:
    graph = _first_write_graph(ChannelState, open_saver(allowlisted()))
    config = {"configurable": {"thread_id": "t-first-channel"}}
    graph.invoke({}, config)
    plan = plan_of(graph, config)
    assert plan.version == 0 and plan.steps == []
    assert plan.rejections[0].kind == "plan"
    assert any("dependency cycle" in r for r in plan.rejections[0].reasons)


def test_overwrite_skips_a_plain_reducer_but_not_plan_channel(open_saver: Callable[..., SqliteSaver]) -> None:
    config = {"configurable": {"thread_id": "t-overwrite"}}
    forged = {**PLAN, "steps": [{**PLAN["steps"][0], "description": "forged"}, *PLAN["steps"][1:]]}

    plain = build(ReducerState, open_saver(allowlisted()))
    plain.invoke({"plan": None}, config)
    plain.update_state(config, {"plan": Overwrite(forged)})
    # a plain reducer channel hands Overwrite values straight to state: the done step is gone
    assert plain.get_state(config).values["plan"] == forged

    config = {"configurable": {"thread_id": "t-overwrite-channel"}}
    guarded = build(ChannelState, open_saver(allowlisted()))
    guarded.invoke({}, config)
    before = plan_of(guarded, config)
    guarded.update_state(config, {"plan": Overwrite(forged)})
    after = plan_of(guarded, config)
    assert after.steps == before.steps
    assert "'fetch' is done" in " ".join(after.rejections[-1].reasons)


def test_a_packed_plan_written_by_update_state_cannot_undo_a_done_step(open_saver: Callable[..., SqliteSaver]) -> None:
    """The channel stores the plan packed (`planmode._packed`); a state edit that writes that form, with the done
    step's work rewritten, goes through the reducer like any other write: refused, the done step kept."""
    from planmode._packed import pack_plan_data

    config = {"configurable": {"thread_id": "t-packed-edit"}}
    guarded = build(ChannelState, open_saver(allowlisted()))
    guarded.invoke({}, config)
    before = plan_of(guarded, config)
    assert any(s.status.value == "done" for s in before.steps)
    forged = before.model_dump(mode="json")
    forged["steps"] = [
        {**s, "description": "forged", "status": "pending", "result": None} if s["status"] == "done" else s
        for s in forged["steps"]
    ]
    for value in (pack_plan_data(forged), Overwrite(pack_plan_data(forged))):
        guarded.update_state(config, {"plan": value})
        after = plan_of(guarded, config)
        assert [(s.id, s.description, s.status) for s in after.steps] == [
            (s.id, s.description, s.status) for s in before.steps
        ]
        assert after.rejections, "the edit is recorded as refused"
