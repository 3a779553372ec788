"""An approval the policy gives starts the first batch in approve's own super-step (as verify starts the later
ones): no dispatch super-step on the auto path. A human's approval still goes through dispatch, which checks
the plan is the revision approved; a gate around dispatch (budget, per-step approval) keeps dispatch too."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from planmode.graph import build_graph
from planmode.state.approvals import decisions
from planmode.state.models import StepStatus
from planmode.testing.scripted import PurposeScript, ScriptedChatModel
from tests.graph.nodes.test_approval_integrity import Recorder, cfg

PLAN = {
    "title": "Release",
    "steps": [
        {"id": "a", "description": "build"},
        {"id": "b", "description": "test", "dependencies": ["a"]},
        {"id": "c", "description": "document", "dependencies": ["a"]},
    ],
}
TASK = {"messages": [("user", "build, then test and document")]}


def _tasks(graph: Any, payload: Any, context: dict[str, Any] | None, **kwargs: Any) -> list[list[str]]:
    """The node names of each super-step of a run (``debug`` stream)."""
    steps: dict[int, list[str]] = {}
    for event in graph.stream(payload, cfg(), context=context, stream_mode="debug", **kwargs):
        if event["type"] == "task":
            steps.setdefault(event["step"], []).append(event["payload"]["name"])
    return [sorted(names) for _, names in sorted(steps.items())]


def test_an_auto_approval_starts_the_first_batch_in_its_own_super_step(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLAN)), executor=runs, checkpointer=checkpointer)

    steps = _tasks(graph, TASK, {"mode": "plan", "approval": "auto"})

    assert steps == [
        ["detect"],
        ["plan"],
        ["approve"],
        ["execute_step"],
        ["verify"],
        ["execute_step", "execute_step"],
        ["verify"],
        ["finalize"],
    ]
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed"
    assert sorted(runs.runs) == ["a", "b", "c"]
    # approve's checkpoint: the approval recorded, the first batch (a) marked running, bound to nothing left over
    history = list(graph.get_state_history(cfg()))  # newest first
    at = next(i for i, s in enumerate(history) if s.next == ("approve",))
    approved = history[at].values["plan"]  # the plan approve was shown
    after_approve = history[at - 1]
    assert after_approve.next == ("execute_step",)
    plan = after_approve.values["plan"]
    assert [s.id for s in plan.by_status(StepStatus.RUNNING)] == ["a"]
    assert [
        (r["kind"], r["decision"], r["by"], r["revision"]) for r in decisions(after_approve.values["approvals"])
    ] == [("plan", "approved", "policy", approved.revision)]


def test_a_human_approval_still_goes_through_dispatchs_revision_check(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLAN)), executor=runs, checkpointer=checkpointer)
    graph.invoke(TASK, cfg(), context={"mode": "plan", "approval": "ask"})
    revision = graph.get_state(cfg()).interrupts[0].value["revision"]

    steps = _tasks(graph, Command(resume={"action": "approve", "revision": revision}), None)

    assert steps[:3] == [["approve"], ["dispatch"], ["execute_step"]]
    assert graph.get_state(cfg()).values["status"] == "completed"
    assert sorted(runs.runs) == ["a", "b", "c"]


@pytest.mark.parametrize(
    "gate",
    [{"max_tokens": 10**9}, {"check_staleness": True, "workspace": "WORKSPACE"}],
    ids=["budget", "staleness-after-a-resume"],
)
def test_a_gate_around_dispatch_keeps_the_dispatch_super_step(
    checkpointer: SqliteSaver, gate: dict[str, Any], tmp_path: Any
) -> None:
    """A budget limit may stop the next batch, so dispatch (behind the budget check) decides; the same for a
    workspace fingerprint that is due for a check (the first super-step of a resumed invocation)."""
    runs = Recorder()
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLAN)), executor=runs, checkpointer=checkpointer)
    context = {"mode": "plan", "approval": "auto", **gate}
    if context.get("workspace") == "WORKSPACE":
        (tmp_path / "notes.txt").write_text("x")
        context["workspace"] = str(tmp_path)
        # a breakpoint before approve: the approval then runs as the first super-step of a resumed invocation
        graph.invoke(TASK, cfg(), context=context, interrupt_before=["approve"])
        steps = _tasks(graph, None, context)
        assert steps[:2] == [["approve"], ["dispatch"]]
    else:
        steps = _tasks(graph, TASK, context)
        assert steps[2:4] == [["approve"], ["dispatch"]]
    assert graph.get_state(cfg()).values["status"] == "completed"
    assert sorted(runs.runs) == ["a", "b", "c"]


def test_an_edit_at_a_breakpoint_after_an_auto_approval_runs_each_step_once(checkpointer: SqliteSaver) -> None:
    """A breakpoint right after the approval (before the first step): the router re-runs on the edited state (a
    step added after a); the run goes on from there, every step runs once, the added one after its dependency."""
    runs = Recorder()
    graph = build_graph(ScriptedChatModel(responder=PurposeScript(plan=PLAN)), executor=runs, checkpointer=checkpointer)
    context = {"mode": "plan", "approval": "auto"}
    graph.invoke(TASK, cfg(), context=context, interrupt_before=["execute_step"])
    assert graph.get_state(cfg()).next == ("execute_step",)
    graph.update_state(
        cfg(),
        {"plan": {"reason": "one more", "add_steps": [{"id": "d", "description": "ship", "dependencies": ["a"]}]}},
    )

    graph.invoke(None, cfg(), context=context)

    assert graph.get_state(cfg()).values["status"] == "completed"
    assert sorted(runs.runs) == ["a", "b", "c", "d"]
    assert runs.runs[0] == "a"
