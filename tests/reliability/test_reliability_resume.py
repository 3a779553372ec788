"""Reliability: bad resume values at the approval interrupt are answered by asking again, with an error.

Every value is sent with ``Command(resume=...)`` to a run waiting at the approval, on a real SQLite file. The
run must stay at the approval: a new interrupt whose payload carries a non-empty ``error``, the plan and its
revision unchanged, nothing executed. A correct approval afterwards runs the plan to completion.
"""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from planmode.context import PlanModeContext
from planmode.executors import StepContext
from planmode.graph import build_graph
from planmode.state.models import Step, StepStatus
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

TASK = "Collect the numbers, then check them, then write the report"
PLAN = {
    "title": "Numbers",
    "steps": [
        {"id": "a", "description": "collect the numbers"},
        {"id": "b", "description": "check the numbers", "dependencies": ["a"]},
        {"id": "c", "description": "write the report", "dependencies": ["b"]},
    ],
}
ASK = PlanModeContext(mode="plan", approval="ask")
STALE = "0000000000000000"

#: (name, resume value); ``REV`` inside a value is replaced by the revision shown.
BAD_VALUES: list[tuple[str, Any]] = [
    ("empty_string", ""),
    ("bare_word", "approve"),
    ("broken_json_string", '{"action": "approve", "revision": '),
    ("json_string_of_a_list", "[1, 2]"),
    ("deeply_nested_json_string", "[" * 50_000 + "]" * 50_000),
    ("huge_string", "x" * 1_000_000),
    ("number", 42),
    ("boolean", True),
    ("list", ["approve", "REV"]),
    ("object_without_action", {"revision": "REV"}),
    ("unknown_action", {"action": "yes please", "revision": "REV"}),
    ("action_in_capitals", {"action": "APPROVE", "revision": "REV"}),
    ("action_not_a_string", {"action": ["approve"], "revision": "REV"}),
    ("approve_without_revision", {"action": "approve"}),
    ("approve_stale_revision", {"action": "approve", "revision": STALE}),
    ("approve_revision_not_a_string", {"action": "approve", "revision": 12345}),
    ("reject_without_feedback", {"action": "reject"}),
    ("reject_blank_feedback", {"action": "reject", "feedback": "   "}),
    ("reject_feedback_not_a_string", {"action": "reject", "feedback": ["shorter"]}),
    ("edit_without_plan_or_patch", {"action": "edit", "revision": "REV"}),
    ("edit_with_plan_and_patch", {"action": "edit", "revision": "REV", "plan": PLAN, "patch": {"title": "x"}}),
    ("edit_patch_broken_json", {"action": "edit", "revision": "REV", "patch": '{"add_steps": [}'}),
    ("edit_patch_nested_too_deeply", {"action": "edit", "revision": "REV", "patch": "[" * 50_000 + "]" * 50_000}),
    ("edit_patch_not_an_object", {"action": "edit", "revision": "REV", "patch": [1, 2]}),
    (
        "edit_unknown_dependency",
        {
            "action": "edit",
            "revision": "REV",
            "patch": {"add_steps": [{"id": "n", "description": "new", "dependencies": ["ghost"]}]},
        },
    ),
    (
        "edit_cycle",
        {"action": "edit", "revision": "REV", "patch": {"update_steps": [{"id": "a", "dependencies": ["c"]}]}},
    ),
    ("edit_empty_plan", {"action": "edit", "revision": "REV", "plan": {"steps": []}}),
    (
        "edit_invalid_step_id",
        {"action": "edit", "revision": "REV", "patch": {"add_steps": [{"id": "no spaces", "description": "x"}]}},
    ),
    ("edit_changes_nothing", {"action": "edit", "revision": "REV", "patch": {"reason": "looks good"}}),
    (
        "edit_same_plan_with_statuses",
        {
            "action": "edit",
            "revision": "REV",
            "plan": {**PLAN, "steps": [{**s, "status": "done"} for s in PLAN["steps"]]},
        },
    ),
    ("edit_without_revision", {"action": "edit", "patch": {"title": "New title"}}),
    ("edit_revision_not_a_string", {"action": "edit", "revision": 7, "patch": {"title": "New title"}}),
    ("edit_stale_revision", {"action": "edit", "revision": STALE, "patch": {"title": "New title"}}),
]


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: list[str] = []

    def __call__(self, step: Step, ctx: StepContext) -> str:
        with self.lock:
            self.runs.append(step.id)
        return f"{step.id} done"


def _with_revision(value: Any, revision: str) -> Any:
    return json.loads(json.dumps(value).replace('"REV"', json.dumps(revision))) if value != "" else value


@pytest.mark.parametrize(("name", "value"), BAD_VALUES, ids=[n for n, _ in BAD_VALUES])
def test_a_bad_resume_value_is_answered_by_asking_again(saver: SqliteSaver, name: str, value: Any) -> None:
    executor = Recorder()
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLAN)), executor=executor, checkpointer=saver)
    config = {"configurable": {"thread_id": f"resume-{name}"}}
    graph.invoke({"messages": [("user", TASK)]}, config, context=ASK)
    before = graph.get_state(config)
    shown = before.interrupts[0].value
    plan_before = before.values["plan"]

    graph.invoke(Command(resume=_with_revision(value, shown["revision"])), config)  # must not raise

    after = graph.get_state(config)
    assert after.next == ("approve",)
    assert len(after.interrupts) == 1
    payload = after.interrupts[0].value
    assert isinstance(payload["error"], str) and payload["error"].strip(), payload["error"]
    assert len(payload["error"]) < 2_000  # the error quotes the value, it does not echo a megabyte back
    assert payload["revision"] == shown["revision"]
    assert after.values["plan"].revision == plan_before.revision
    assert after.values["plan"].version == plan_before.version
    assert executor.runs == []

    # asked again: the right answer still works
    graph.invoke(Command(resume={"action": "approve", "revision": payload["revision"]}), config)
    final = graph.get_state(config).values
    assert final["status"] == "completed", final.get("error")
    assert sorted(executor.runs) == ["a", "b", "c"]
    assert all(s.status is StepStatus.DONE for s in final["plan"].steps)


def test_many_bad_values_in_a_row_then_an_approval(saver: SqliteSaver) -> None:
    executor = Recorder()
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLAN)), executor=executor, checkpointer=saver)
    config = {"configurable": {"thread_id": "resume-in-a-row"}}
    graph.invoke({"messages": [("user", TASK)]}, config, context=ASK)
    revision = graph.get_state(config).interrupts[0].value["revision"]
    errors = set()
    for _, value in BAD_VALUES[:12]:
        graph.invoke(Command(resume=_with_revision(value, revision)), config)
        state = graph.get_state(config)
        assert state.next == ("approve",)
        errors.add(state.interrupts[0].value["error"])
    assert len(errors) >= 6  # the errors say what is wrong with each value, not one generic message
    graph.invoke(Command(resume={"action": "approve", "revision": revision}), config)
    assert graph.get_state(config).values["status"] == "completed"
    assert sorted(executor.runs) == ["a", "b", "c"]


def test_an_empty_object_is_read_by_langgraph_as_an_empty_resume_map(saver: SqliteSaver) -> None:
    """``Command(resume={})`` never reaches planmode: LangGraph reads a dict as a map from interrupt ids to
    values, and an empty one resumes nothing. The run stays at the same question and nothing runs."""
    executor = Recorder()
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLAN)), executor=executor, checkpointer=saver)
    config = {"configurable": {"thread_id": "resume-empty-map"}}
    graph.invoke({"messages": [("user", TASK)]}, config, context=ASK)
    shown = graph.get_state(config).interrupts[0].value
    graph.invoke(Command(resume={}), config)
    state = graph.get_state(config)
    assert state.next == ("approve",) and state.interrupts[0].value["revision"] == shown["revision"]
    assert executor.runs == []


def test_a_none_resume_leaves_the_thread_at_the_approval(saver: SqliteSaver) -> None:
    """``Command(resume=None)`` fails inside LangGraph 1.2 itself (UnboundLocalError before any node runs);
    whatever LangGraph does with it, the thread must stay at the approval and take a real answer."""
    executor = Recorder()
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLAN)), executor=executor, checkpointer=saver)
    config = {"configurable": {"thread_id": "resume-none"}}
    graph.invoke({"messages": [("user", TASK)]}, config, context=ASK)
    revision = graph.get_state(config).interrupts[0].value["revision"]
    with contextlib.suppress(Exception):  # LangGraph's own error, not planmode's
        graph.invoke(Command(resume=None), config)
    state = graph.get_state(config)
    assert state.next == ("approve",) and executor.runs == []
    graph.invoke(Command(resume={"action": "approve", "revision": revision}), config)
    assert graph.get_state(config).values["status"] == "completed"


def test_the_list_of_bad_values_is_long_enough() -> None:
    assert len(BAD_VALUES) >= 10
