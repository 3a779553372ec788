"""Issue 43, items 1, 2 and 8: only the approver makes a step run.

1. A sealed approval record is bound to its thread, graph namespace and run: copied from another thread, or
   replayed from an earlier run of the same thread with ``update_state(..., as_node="approve")``, it approves
   nothing, resets nothing and hides nothing; the refusal is recorded and the run waits at its approval.
2. A repair that adds a step, or a write tool to a step, is decided by the approval policy (a human under
   ``ask_human``; ``read_only_auto`` asks a human for a write), never by ``reapprove_patches=false``. A repair
   that adds neither runs on the earlier grant.
8. A run is ``completed`` only when every step is done or skipped by a human.

The ``langgraph dev`` variant of item 1 is ``tests/ecosystem/test_studio_approval_replay.py``.
"""

from __future__ import annotations

import threading
from typing import Any

from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command, Send

from planmode.approval.policy import ask_human, read_only_auto
from planmode.executors import StepContext
from planmode.graph import build_graph
from planmode.state.approvals import current_run, decisions
from planmode.state.models import Step, StepStatus
from planmode.state.reducer import PlanUpdate
from planmode.testing.scripted import PurposeScript, ScriptedChatModel
from planmode.tools import read_only
from tests.graph.nodes.test_execution_guard import ASK, TASK, Recorder, approve_shown, cfg, graph_with, interrupt_of

S = StepStatus


def _human_grants(log: Any) -> list[dict[str, Any]]:
    return [r for r in decisions(log) if r.get("kind") == "plan" and r.get("by") == "human" and "steps" in r]


def _copy_attack(graph: Any, target: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a user of the thread can do: write sealed records taken elsewhere "as" the approve node, saying the
    plan is approved, then go on. Returns the custom events of the run that follows."""
    update = {"approvals": records, "needs_approval": False, "status": "running", "approval_error": None}
    graph.update_state(cfg(target), update, as_node="approve")
    return list(graph.stream(None, cfg(target), stream_mode="custom"))


def _approved_records(graph: Any, name: str) -> list[dict[str, Any]]:
    """The sealed ``new_run`` record and the human's plan grant of thread ``name`` (the attack copies these)."""
    log = graph.get_state(cfg(name)).values["approvals"]
    taken = [r for r in log if r.get("kind") == "new_run" or (r.get("kind") == "plan" and r.get("by") == "human")]
    assert [r["kind"] for r in taken] == ["new_run", "plan"]
    return taken


# -- 1. records bound to their thread, namespace and run -----------------------------------------------------


def test_a_human_grant_copied_from_another_thread_runs_nothing_there(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph = graph_with(checkpointer, runs)
    graph.invoke({"messages": [("user", TASK)]}, cfg("A"), context=ASK)
    approve_shown(graph, "A")
    assert graph.get_state(cfg("A")).values["status"] == "completed"
    stolen = _approved_records(graph, "A")
    runs.runs.clear()

    graph.invoke({"messages": [("user", TASK)]}, cfg("B"), context=ASK)  # B waits at its own approval
    before = graph.get_state(cfg("B")).values["approvals"]
    _copy_attack(graph, "B", stolen)

    assert runs.runs == []  # nothing of B ran
    state = graph.get_state(cfg("B"))
    assert state.values["status"] == "awaiting_approval"
    assert interrupt_of(graph, "B")["type"] == "planmode.approval"  # B asks its own human, and stays readable
    log = state.values["approvals"]
    assert log[: len(before)] == before  # B's log was neither reset nor rewritten
    assert current_run(log) == current_run(before)
    assert _human_grants(log) == []  # B's log does not say "approved by human"
    refused = [r for r in decisions(log) if r["kind"] == "refused" and r["policy"] == "approval record"]
    assert {r["refused"]["kind"] for r in refused} == {"new_run", "plan"}
    assert {r["refused"]["thread"] for r in refused} == {"A"}


def test_an_earlier_runs_records_replayed_into_a_later_run_run_nothing_and_hide_nothing(
    checkpointer: SqliteSaver,
) -> None:
    runs = Recorder()
    graph = graph_with(checkpointer, runs)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ASK)
    approve_shown(graph)  # run 1: a human approved it, it ran
    stolen = _approved_records(graph, "t")
    runs.runs.clear()

    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ASK)  # run 2, same task, same plan
    shown = interrupt_of(graph)
    graph.invoke(Command(resume={"action": "reject", "feedback": "not this way"}), cfg())  # a rejection to keep
    before = graph.get_state(cfg()).values["approvals"]
    assert [r["decision"] for r in decisions(before)] == ["rejected"]
    assert current_run(before) != stolen[0]["run"]
    del shown

    _copy_attack(graph, "t", stolen)

    assert runs.runs == []
    state = graph.get_state(cfg())
    log = state.values["approvals"]
    assert log[: len(before)] == before  # the rejection is still in the audit
    assert current_run(log) == current_run(before)
    assert _human_grants(log) == []
    assert any(r["kind"] == "refused" and r["refused"]["kind"] == "new_run" for r in decisions(log))
    assert state.values["status"] == "awaiting_approval" and state.interrupts


def test_a_copied_log_on_a_fresh_thread_reaches_the_guard_and_is_refused_there(checkpointer: SqliteSaver) -> None:
    """The whole approved state of thread A (its plan and its sealed log, the log's own new_run included) written
    into a fresh thread C, step a marked running and sent straight to execute_step: the guard compares each grant
    with C's own config, finds them bound to A, refuses, records it, emits ``step_refused``, and asks C's human."""
    runs = Recorder()
    graph = graph_with(checkpointer, runs)
    graph.invoke({"messages": [("user", TASK)]}, cfg("A"), context=ASK)
    approve_shown(graph, "A", interrupt_before=["execute_step"])
    a = graph.get_state(cfg("A")).values
    assert runs.runs == []

    graph.update_state(
        cfg("C"),
        {"messages": a["messages"], "goal": a["goal"], "settings": a["settings"], "plan": a["plan"]},
        as_node="plan",
    )
    graph.update_state(cfg("C"), {"approvals": a["approvals"], "status": "running"}, as_node="approve")
    graph.update_state(
        cfg("C"),
        {"plan": PlanUpdate(transitions=[{"id": "a", "status": "running", "attempts": 1}], source="human")},
        as_node="dispatch",
    )
    assert graph.get_state(cfg("C")).values["plan"].get("a").status is S.RUNNING
    events = list(graph.stream(Command(goto=Send("execute_step", {"step_id": "a"})), cfg("C"), stream_mode="custom"))

    assert runs.runs == []
    values = graph.get_state(cfg("C")).values
    refused = [r for r in decisions(values["approvals"]) if r["kind"] == "refused" and r.get("step") == "a"]
    assert refused and "another thread" in refused[0]["reason"]
    assert refused[0]["thread"] == "C"
    assert any(e["type"] == "step_refused" for e in events)
    assert interrupt_of(graph, "C")["type"] == "planmode.approval"


def test_a_new_run_record_follows_the_run_it_replaces() -> None:
    from planmode.state.approvals import add_approval_records, new_run_record

    first = add_approval_records([], [new_run_record("r1")])
    second = add_approval_records(first, [new_run_record("r2", after="r1")])
    assert current_run(second) == "r2"
    replayed = add_approval_records(second, [first[0]])  # r1's start again: refused, recorded, nothing reset
    assert current_run(replayed) == "r2" and replayed[: len(second)] == second
    assert replayed[-1]["kind"] == "refused" and replayed[-1]["refused"]["run"] == "r1"
    stray = add_approval_records(second, [new_run_record("r3", after="r0")])  # follows a run this log is not
    assert current_run(stray) == "r2" and stray[-1]["kind"] == "refused"
    again = add_approval_records(second, [second[0]])  # an exact copy of a record in the log adds nothing
    assert again == second
    flood = add_approval_records(replayed, [first[0]] * 5)  # a replay sent again is refused once, not again
    assert flood == replayed


# -- 2. a repair goes through the policy when it adds a step or a write tool -------------------------------------


@tool
def deploy(target: str) -> str:
    """Deploy the service to ``target``."""
    DEPLOYS.append(target)
    return f"deployed to {target}"


@read_only
@tool
def check(target: str) -> str:
    """Look at ``target``."""
    return f"{target} looks fine"


DEPLOYS: list[str] = []
REPAIR_TASK = "Build the service, then check it, then report"
REPAIR_PLAN = {
    "title": "Service",
    "steps": [
        {"id": "build", "description": "build the service", "tools": ["check"]},
        {"id": "report", "description": "report on the build", "dependencies": ["build"], "tools": ["check"]},
    ],
}
NEEDS_ADJUSTMENT = {"assessment": "needs_adjustment", "reasoning": "build failed", "guidance": "ship it"}
DEPLOY_PATCH = {
    "reason": "ship it instead",
    "add_steps": [
        {
            "id": "ship",
            "description": "deploy the service to production",
            "tools": ["deploy"],
            "acceptance": "the service answers in production",
        }
    ],
    "update_steps": [{"id": "build", "description": "build the service again"}],
}
REWORD_PATCH = {"reason": "say it better", "update_steps": [{"id": "build", "description": "build the service again"}]}


class Runs:
    """An executor that calls ``deploy`` for a step that declares it, and a verifier that fails build once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: list[str] = []

    def execute(self, step: Step, ctx: StepContext) -> str:
        with self.lock:
            self.runs.append(step.id)
        for t in ctx.tools:
            if t.name == "deploy":
                return str(t.invoke({"target": "production"}))
        return f"{step.id} finished"

    def verify(self, step: Step, output: str, ctx: StepContext) -> tuple[bool, str]:
        if step.id == "build" and self.runs.count("build") == 1:
            return False, "the build failed"
        return True, ""


def _repair_graph(checkpointer: SqliteSaver, patch: dict[str, Any], policy: Any) -> tuple[Any, Runs]:
    DEPLOYS.clear()
    runs = Runs()
    model = ScriptedChatModel(responder=PurposeScript(plan=REPAIR_PLAN, reflect=NEEDS_ADJUSTMENT, patch=patch))
    graph = build_graph(
        model,
        tools=[deploy, check],
        executor=runs.execute,
        verifier=runs.verify,
        checkpointer=checkpointer,
        approval_policy=policy,
    )
    return graph, runs


def test_a_repair_that_adds_a_deploy_step_waits_for_the_human_under_ask_human(checkpointer: SqliteSaver) -> None:
    graph, runs = _repair_graph(checkpointer, DEPLOY_PATCH, ask_human)
    graph.invoke({"messages": [("user", REPAIR_TASK)]}, cfg(), context={"mode": "plan", "max_attempts": 1})
    approve_shown(graph)  # the human approved build and report, nothing else

    assert DEPLOYS == [] and "ship" not in runs.runs
    shown = interrupt_of(graph)  # the repair is shown to the human
    assert shown["type"] == "planmode.approval" and "ship" in [s["id"] for s in shown["plan"]["steps"]]
    log = graph.get_state(cfg()).values["approvals"]
    assert [r for r in decisions(log) if r["kind"] == "patch"] == []  # not granted "by settings"
    graph.invoke(Command(resume={"action": "approve", "revision": shown["revision"]}), cfg())
    assert DEPLOYS == ["production"]  # after the human's answer, and only then
    assert graph.get_state(cfg()).values["status"] == "completed"


def test_a_repair_that_adds_a_deploy_step_is_not_auto_approved_by_read_only_auto(checkpointer: SqliteSaver) -> None:
    graph, runs = _repair_graph(checkpointer, DEPLOY_PATCH, read_only_auto)
    graph.invoke({"messages": [("user", REPAIR_TASK)]}, cfg(), context={"mode": "plan", "max_attempts": 1})

    assert runs.runs == ["build"]  # the read-only plan ran by the policy, its repair did not
    assert DEPLOYS == []
    shown = interrupt_of(graph)  # the policy asks a human for a plan with a write step
    assert shown["type"] == "planmode.approval" and "ship" in [s["id"] for s in shown["plan"]["steps"]]
    log = graph.get_state(cfg()).values["approvals"]
    assert [r for r in decisions(log) if r["kind"] == "patch"] == []


def test_a_repair_that_adds_a_write_tool_to_a_step_is_not_granted_by_the_settings(checkpointer: SqliteSaver) -> None:
    armed = {"id": "build", "tools": ["check", "deploy"], "acceptance": "the service answers in production"}
    arm = {"reason": "ship from the build", "update_steps": [armed]}
    graph, runs = _repair_graph(checkpointer, arm, read_only_auto)
    graph.invoke({"messages": [("user", REPAIR_TASK)]}, cfg(), context={"mode": "plan", "max_attempts": 1})
    assert DEPLOYS == [] and runs.runs == ["build"]
    assert interrupt_of(graph)["type"] == "planmode.approval"


def test_a_settings_grant_of_an_added_step_is_refused_by_the_guard(checkpointer: SqliteSaver) -> None:
    """The guard holds the rule itself: a sealed ``patch`` grant by the settings that covers a step no human
    or policy decided (as an older patch node wrote them) does not make it run."""
    from planmode.state.approvals import covering_grant, grant

    graph, _runs = _repair_graph(checkpointer, REWORD_PATCH, ask_human)
    graph.invoke({"messages": [("user", REPAIR_TASK)]}, cfg(), context={"mode": "plan"})
    approve_shown(graph, interrupt_before=["execute_step"])
    values = graph.get_state(cfg()).values
    plan = values["plan"]
    ship = Step(id="ship", description="deploy the service to production", tools=["deploy"])
    patched = plan.model_copy(update={"steps": [*plan.steps, ship]})
    settings_grant = grant(values["approvals"], "patch", patched, policy="reapprove_patches=false", by="settings")
    log = [*values["approvals"], settings_grant]
    assert covering_grant(log, plan.get("build"), plan.goal, binding=None) is not None
    assert covering_grant(log, ship, plan.goal, binding=None) is None  # no decided grant covered ship
    armed = plan.get("build").model_copy(update={"tools": ["check", "deploy"]})
    arming = grant(values["approvals"], "patch", plan, steps=[armed], policy="x", by="settings")
    assert covering_grant([*values["approvals"], arming], armed, plan.goal, binding=None) is None


def test_a_repair_that_only_rewords_a_read_only_step_runs_on_the_earlier_grant(checkpointer: SqliteSaver) -> None:
    graph, runs = _repair_graph(checkpointer, REWORD_PATCH, ask_human)
    graph.invoke({"messages": [("user", REPAIR_TASK)]}, cfg(), context={"mode": "plan", "max_attempts": 1})
    approve_shown(graph)

    state = graph.get_state(cfg())
    assert not state.interrupts  # one human answer: the repair did not ask again
    assert state.values["status"] == "completed"
    assert runs.runs == ["build", "build", "report"]
    patch_grants = [r for r in decisions(state.values["approvals"]) if r["kind"] == "patch"]
    assert [(r["decision"], r["by"]) for r in patch_grants] == [("approved", "settings")]


# -- 8. completed means every step done or skipped by a human ------------------------------------------------


class FailA:
    def __init__(self) -> None:
        self.runs: list[str] = []

    def execute(self, step: Step, ctx: StepContext) -> str:
        self.runs.append(step.id)
        return f"{step.id} finished"

    def verify(self, step: Step, output: str, ctx: StepContext) -> tuple[bool, str]:
        return (False, "a is wrong") if step.id == "a" else (True, "")


AB_TASK = "Collect the numbers, then check them"
AB_PLAN = {
    "title": "Numbers",
    "steps": [
        {"id": "a", "description": "collect the numbers"},
        {"id": "b", "description": "check the numbers", "dependencies": ["a"]},
    ],
}


def test_a_run_whose_repair_skipped_everything_is_not_completed(checkpointer: SqliteSaver) -> None:
    reflections = iter(
        [
            {"assessment": "needs_adjustment", "reasoning": "a cannot be done", "guidance": "skip it"},
            {"assessment": "complete", "reasoning": "nothing more to do"},
        ]
    )
    skip_a = {"reason": "a cannot be done", "update_steps": [{"id": "a", "status": "skipped"}]}
    model = ScriptedChatModel(
        responder=PurposeScript(plan=AB_PLAN, reflect=lambda _req: next(reflections), patch=skip_a)
    )
    runs = FailA()
    graph = build_graph(model, executor=runs.execute, verifier=runs.verify, checkpointer=checkpointer)
    graph.invoke(
        {"messages": [("user", AB_TASK)]}, cfg(), context={"mode": "plan", "approval": "auto", "max_attempts": 1}
    )

    values = graph.get_state(cfg()).values
    assert runs.runs == ["a"]
    assert values["status"] == "failed"
    assert values["report"]["done"] == []
    assert "skipped by the run's repair, not by a human: a" in values["error"]
    assert "never ran: b" in values["error"]


def test_a_run_whose_steps_a_human_skipped_is_completed(checkpointer: SqliteSaver) -> None:
    runs = FailA()
    model = ScriptedChatModel(responder=PurposeScript(plan=AB_PLAN))
    graph = build_graph(model, executor=runs.execute, verifier=runs.verify, checkpointer=checkpointer)
    graph.invoke({"messages": [("user", AB_TASK)]}, cfg(), context=ASK)
    shown = interrupt_of(graph)
    skip = {"update_steps": [{"id": "a", "status": "skipped"}, {"id": "b", "status": "skipped"}]}
    graph.invoke(Command(resume={"action": "edit", "revision": shown["revision"], "patch": skip}), cfg())
    values = graph.get_state(cfg()).values
    assert runs.runs == []
    assert values["status"] == "completed", values.get("error")


def test_the_binding_is_the_graphs_own_thread_and_namespace_not_the_tasks() -> None:
    from planmode.state.approvals import binding_of

    assert binding_of({"thread_id": "T", "checkpoint_ns": "execute_step:1b2c"}) == ("T", "")
    assert binding_of({"thread_id": "T", "checkpoint_ns": "approve:9f"}) == ("T", "")  # any node, one graph
    nested = {"thread_id": 7, "checkpoint_ns": "planmode:aa|execute_step:bb"}
    assert binding_of(nested) == ("7", "planmode")  # a subgraph's grants are its own, whatever its task id
    assert binding_of({"thread_id": "T", "checkpoint_ns": "other:aa|execute_step:bb"}) != binding_of(nested)
    assert binding_of({}) == (None, "")
