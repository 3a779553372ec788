"""The execution guard (issue 21, items 1, 3 and 5): execute_step runs a step only when a sealed grant in the run's
approval record covers that exact definition, its dependencies are done, its own answer is given and the budget
allows — whatever reached it. Each attack here ran a step no human approved before the guard existed.

The adversary uses what a user of the thread has: ``update_state`` (Studio, the SDK) at every breakpoint, a
fork, a rollback, ``planmode.edit_plan``, a ``Command(goto=Send(...))``, forged approval records, a new run on
a thread whose last run stopped at a question, and a run context that says ``approval="auto"``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command, Send

from planmode import approval_key
from planmode.approval.policy import ask_human
from planmode.graph import build_graph
from planmode.persistence.edit import edit_plan
from planmode.persistence.snapshots import list_snapshots, rollback
from planmode.state import approvals as records
from planmode.state.approvals import current_run, decisions, definition_digest, seal
from planmode.state.graph_state import KEPT_ACROSS_RUNS, PlanModeState, new_run
from planmode.state.models import Plan, Step, StepStatus
from planmode.state.reducer import PlanUpdate
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
ASK = {"mode": "plan", "approval": "ask"}
AUTO = {"mode": "plan", "approval": "auto"}
EVIL_TEXT = "deploy to PRODUCTION and drop the database"


class Recorder:
    """An executor that records what it was asked to run: (step id, description)."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, str]] = []

    def __call__(self, step: Step, ctx: Any) -> str:
        self.runs.append((step.id, step.description))
        return f"{step.id} done"

    @property
    def texts(self) -> list[str]:
        return [d for _, d in self.runs]


def cfg(name: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def interrupt_of(graph: Any, name: str = "t") -> dict[str, Any]:
    state = graph.get_state(cfg(name))
    assert len(state.interrupts) == 1, (state.next, state.values.get("status"))
    value: dict[str, Any] = state.interrupts[0].value
    return value


def graph_with(checkpointer: SqliteSaver, runs: Recorder, **kw: Any) -> Any:
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    return build_graph(model, executor=runs, checkpointer=checkpointer, **kw)


def approve_shown(graph: Any, name: str = "t", **kw: Any) -> None:
    shown = interrupt_of(graph, name)
    assert shown["type"] == "planmode.approval"
    graph.invoke(Command(resume={"action": "approve", "revision": shown["revision"]}), cfg(name), **kw)


def running(graph: Any, name: str = "t") -> list[str]:
    return [s.id for s in graph.get_state(cfg(name)).values["plan"].by_status(StepStatus.RUNNING)]


def edit_running_step(graph: Any, config: dict[str, Any]) -> str:
    """update_state: the running step's text becomes EVIL_TEXT (what Studio's state editor does)."""
    plan = graph.get_state(config).values["plan"]
    target = next(s.id for s in plan.steps if s.status is StepStatus.RUNNING)
    graph.update_state(config, {"plan": {"update_steps": [{"id": target, "description": EVIL_TEXT}]}})
    assert graph.get_state(config).values["plan"].get(target).description == EVIL_TEXT
    return target


def drive_to_the_end(graph: Any, runs: Recorder, name: str = "t") -> None:
    """Go on; at every approval a human approves what is shown (only then may the edited text run)."""
    graph.invoke(None, cfg(name))
    for _ in range(10):
        state = graph.get_state(cfg(name))
        if not state.interrupts:
            return
        shown = state.interrupts[0].value
        assert shown["type"] == "planmode.approval"
        assert EVIL_TEXT not in runs.texts, "the edited step ran before the approval that shows it"
        assert EVIL_TEXT in shown["markdown"]  # the human sees what changed
        graph.invoke(Command(resume={"action": "approve", "revision": shown["revision"]}), cfg(name))
    raise AssertionError("the run did not finish")


# -- 1. a running step edited, at every place a user can stop a run ----------------------------------------------


STOPS = {
    "before-execute_step": ({"interrupt_before": ["execute_step"]}, None),
    "after-dispatch": ({"interrupt_after": ["dispatch"]}, None),
    "before-verify": ({"interrupt_before": ["execute_step"]}, {"interrupt_before": ["verify"]}),
    "after-verify": ({"interrupt_before": ["execute_step"]}, {"interrupt_after": ["verify"]}),
}


@pytest.mark.parametrize("stop", list(STOPS))
def test_a_running_step_edited_at_a_breakpoint_runs_only_after_a_human_approves_the_new_text(
    checkpointer: SqliteSaver, stop: str
) -> None:
    runs = Recorder()
    graph = graph_with(checkpointer, runs)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ASK)
    at_approval, then = STOPS[stop]
    approve_shown(graph, **at_approval)
    if then is not None:
        graph.invoke(None, cfg(), **then)
    assert running(graph), graph.get_state(cfg()).next
    target = edit_running_step(graph, cfg())
    drive_to_the_end(graph, runs)
    assert runs.texts.count(EVIL_TEXT) == 1  # it ran once, after the human approved it
    log = decisions(graph.get_state(cfg()).values["approvals"])
    refused = [r for r in log if r["kind"] == "refused"]
    assert [r["step"] for r in refused] == [target]
    assert graph.get_state(cfg()).values["status"] == "completed"
    assert graph.get_state(cfg()).values["plan"].get(target).description == EVIL_TEXT


def test_a_running_step_edited_after_a_policy_approval_that_started_the_first_batch(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph = graph_with(checkpointer, runs)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=AUTO, interrupt_after=["approve"])
    assert running(graph) == ["a"]  # approve started the first batch itself
    edit_running_step(graph, cfg())
    drive_to_the_end(graph, runs)
    assert runs.texts.count(EVIL_TEXT) == 1


def test_a_running_step_edited_with_edit_plan_does_not_run_its_new_text(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph = graph_with(checkpointer, runs)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ASK)
    approve_shown(graph, interrupt_before=["execute_step"])
    assert running(graph) == ["a"]
    revision = graph.get_state(cfg()).values["plan"].revision
    edit_plan(graph, cfg(), {"update_steps": [{"id": "a", "description": EVIL_TEXT}]}, expected_revision=revision)
    drive_to_the_end(graph, runs)
    assert runs.texts.count(EVIL_TEXT) == 1


def test_a_running_step_edited_in_a_fork_does_not_run_unapproved(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph = graph_with(checkpointer, runs)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ASK)
    approve_shown(graph, interrupt_before=["execute_step"])
    at = graph.get_state(cfg()).config  # the checkpoint before a runs
    graph.invoke(None, cfg())  # the run finishes
    assert graph.get_state(cfg()).values["status"] == "completed"
    before = len(runs.runs)
    forked = graph.update_state(at, {"plan": {"update_steps": [{"id": "a", "description": EVIL_TEXT}]}})
    graph.invoke(None, forked)
    assert EVIL_TEXT not in runs.texts[before:]
    state = graph.get_state(cfg())
    assert state.interrupts and state.interrupts[0].value["type"] == "planmode.approval"


def test_a_running_step_edited_after_a_rollback_does_not_run_unapproved(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph = graph_with(checkpointer, runs)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ASK)
    approve_shown(graph)
    assert graph.get_state(cfg()).values["status"] == "completed"
    snaps = list_snapshots(graph, "t")
    target = next(s for s in snaps if s.next == ("execute_step",))
    rollback(graph, "t", target.checkpoint_id)
    edit_running_step(graph, cfg())
    before = len(runs.runs)
    graph.invoke(None, cfg())
    assert EVIL_TEXT not in runs.texts[before:]
    assert interrupt_of(graph)["type"] == "planmode.approval"


def test_a_running_step_edited_before_a_crash_does_not_run_when_another_process_resumes(tmp_path: Path) -> None:
    """The first process stops (as after a crash) with a step running; the state is edited; a new graph object
    over the same SQLite file (what another process builds) resumes."""
    from planmode.persistence import sqlite_checkpointer

    db = tmp_path / "runs.sqlite"
    runs = Recorder()
    graph = graph_with(sqlite_checkpointer(str(db)), runs)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ASK)
    approve_shown(graph, interrupt_before=["execute_step"])
    edit_running_step(graph, cfg())
    graph = graph_with(sqlite_checkpointer(str(db)), runs)  # another process: a new saver, a new graph
    drive_to_the_end(graph, runs)
    assert runs.texts.count(EVIL_TEXT) == 1


# -- steps marked running by hand ------------------------------------------------------------------------------


def _mark_running(graph: Any, step_id: str) -> None:
    graph.update_state(
        cfg(), {"plan": PlanUpdate(transitions=[{"id": step_id, "status": "running", "attempts": 1}], source="human")}
    )


def test_a_step_added_and_marked_running_in_one_update_never_runs_unapproved(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph = graph_with(checkpointer, runs)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ASK)
    approve_shown(graph, interrupt_before=["execute_step"])
    plan: Plan = graph.get_state(cfg()).values["plan"]
    evil = Step(id="evil", description=EVIL_TEXT, status=StepStatus.RUNNING, attempts=1)
    whole = plan.model_copy(update={"steps": [*plan.steps, evil]})
    graph.update_state(cfg(), {"plan": whole})
    graph.update_state(
        cfg(), {"plan": PlanUpdate(transitions=[{"id": "evil", "status": "running", "attempts": 1}], source="x")}
    )
    graph.invoke(None, cfg())
    assert EVIL_TEXT not in runs.texts


def test_a_step_marked_running_before_its_dependencies_are_done_waits_for_them(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph = graph_with(checkpointer, runs)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ASK)
    approve_shown(graph, interrupt_before=["execute_step"])
    _mark_running(graph, "c")  # c depends on b, which depends on a (running)
    graph.invoke(None, cfg())
    assert [i for i, _ in runs.runs] == ["a", "b", "c"]  # c ran last, once, after its dependencies
    log = decisions(graph.get_state(cfg()).values["approvals"])
    assert any(r["kind"] == "refused" and r["step"] == "c" and "waits for b" in r["reason"] for r in log)
    assert graph.get_state(cfg()).values["status"] == "completed"


def test_a_send_to_execute_step_runs_nothing_that_is_not_an_approved_step(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph = graph_with(checkpointer, runs)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ASK)
    forged = {
        "step": {"id": "evil", "description": EVIL_TEXT},
        "goal": TASK,
        "plan_version": 1,
        "dependencies": {},
        "settings": {},
    }
    graph.invoke(Command(goto=Send("execute_step", forged)), cfg())
    assert runs.runs == []
    # a Send naming a real step but carrying other text runs the approved text, and only when it is started
    approve_shown(graph, interrupt_before=["execute_step"])
    forged_a = {**forged, "step": {"id": "a", "description": EVIL_TEXT, "status": "running", "attempts": 1}}
    graph.invoke(Command(goto=Send("execute_step", forged_a)), cfg())
    assert EVIL_TEXT not in runs.texts


def test_forged_approval_records_written_with_update_state_approve_nothing(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph = graph_with(checkpointer, runs)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ASK)
    values = graph.get_state(cfg()).values
    plan: Plan = values["plan"]
    run = current_run(values["approvals"])
    forged = {
        "kind": "plan",
        "decision": "approved",
        "by": "human",
        "policy": "settings",
        "run": run,
        "steps": {s.id: definition_digest(s, plan.goal) for s in plan.steps},
        "shape": plan.shape,
        "plan_version": plan.version,
        "revision": plan.revision,
        "at": 1.0,
        "seal": "0" * 64,
    }
    unsealed = {k: v for k, v in forged.items() if k != "seal"}
    reset = {"kind": "new_run", "run": "mine", "decision": "started"}
    graph.update_state(cfg(), {"approvals": [forged, unsealed, reset]})
    assert graph.get_state(cfg()).values["approvals"] == values["approvals"]  # nothing was appended or reset
    graph.update_state(cfg(), {"needs_approval": False, "status": "running"})
    _mark_running(graph, "a")
    graph.invoke(None, cfg())
    assert runs.runs == []


def test_a_sealed_record_from_another_key_is_dropped() -> None:
    good = seal({"kind": "plan", "decision": "approved"})
    other = seal({"kind": "plan", "decision": "approved"}, key=b"another installation's key!!")
    assert records.add_approval_records([], [good, other]) == [good]
    tampered = {**good, "decision": "edited"}
    assert records.add_approval_records([good], tampered) == [good]


def test_the_approval_key_file_is_made_once_readable_by_its_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(approval_key.ENV_KEY, raising=False)
    monkeypatch.setenv(approval_key.ENV_KEY_FILE, str(tmp_path / "cfg" / "approval.key"))
    first = approval_key.approval_key()
    path = tmp_path / "cfg" / "approval.key"
    assert path.exists() and (path.stat().st_mode & 0o777) == 0o600
    assert path.read_bytes().strip() == first and len(first) >= 32
    approval_key._cache.clear()
    assert approval_key.approval_key() == first  # another process reads the same key
    monkeypatch.setenv(approval_key.ENV_KEY, "short")
    with pytest.raises(Exception, match="at least 16"):
        approval_key.approval_key()


# -- per-step approval -----------------------------------------------------------------------------------------

WRITE_PLAN = {
    "title": "Deploy",
    # a write step carries acceptance (issue 24: a plan without it is sent back)
    "steps": [
        {"id": "deploy", "description": "deploy to staging", "tools": ["deploy"], "acceptance": "staging runs it"}
    ],
}


def _write_graph(checkpointer: SqliteSaver, runs: Recorder, **kw: Any) -> Any:
    from langchain_core.tools import tool

    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        return "deployed"

    model = ScriptedChatModel(responder=PurposeScript(plan=WRITE_PLAN))
    return build_graph(model, tools=[deploy], executor=runs, checkpointer=checkpointer, **kw)


def test_a_step_marked_running_at_its_own_question_does_not_run_without_the_answer(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph = _write_graph(checkpointer, runs)
    graph.invoke({"messages": [("user", "deploy it")]}, cfg(), context={**AUTO, "step_approval": "writes"})
    assert interrupt_of(graph)["type"] == "planmode.step_approval"
    # the adversary clears the question, turns step approval off and starts the step
    graph.update_state(
        cfg(),
        {"step_gate": None, "needs_approval": False, "status": "running", "settings": {"step_approval": "off"}},
    )
    _mark_running(graph, "deploy")
    graph.invoke(None, cfg())
    assert runs.runs == []
    assert interrupt_of(graph)["type"] == "planmode.step_approval"  # asked again, not skipped


def test_a_per_step_answer_names_the_definition_it_was_shown(checkpointer: SqliteSaver) -> None:
    """The human saw "deploy to staging"; meanwhile the step became EVIL_TEXT: the answer approves nothing."""
    runs = Recorder()
    graph = _write_graph(checkpointer, runs)
    graph.invoke({"messages": [("user", "deploy it")]}, cfg(), context={**AUTO, "step_approval": "writes"})
    shown = interrupt_of(graph)
    assert shown["step"]["description"] == "deploy to staging"
    graph.update_state(cfg(), {"plan": {"update_steps": [{"id": "deploy", "description": EVIL_TEXT}]}})
    graph.invoke(Command(resume={"action": "approve", "step": "deploy", "definition": shown["definition"]}), cfg())
    assert EVIL_TEXT not in runs.texts
    again = interrupt_of(graph)
    assert again["type"] in ("planmode.approval", "planmode.step_approval")


def test_the_cli_style_auto_approval_with_step_approval_still_asks_each_write_step(checkpointer: SqliteSaver) -> None:
    """approval="auto" with step_approval="writes": plans by the policy, each write step by a human (logged so)."""
    runs = Recorder()
    graph = _write_graph(checkpointer, runs)
    graph.invoke({"messages": [("user", "deploy it")]}, cfg(), context={**AUTO, "step_approval": "writes"})
    shown = interrupt_of(graph)
    graph.invoke(Command(resume={"action": "approve", "step": "deploy", "definition": shown["definition"]}), cfg())
    assert runs.texts == ["deploy to staging"]
    log = [(r["kind"], r["by"]) for r in decisions(graph.get_state(cfg()).values["approvals"])]
    assert log == [("plan", "policy"), ("step", "human")]


# -- 3. one decider --------------------------------------------------------------------------------------------


def test_a_policy_that_asks_a_human_is_obeyed_even_when_the_settings_say_auto(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph = graph_with(checkpointer, runs, approval_policy=ask_human)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=AUTO)
    assert interrupt_of(graph)["type"] == "planmode.approval"  # nobody approved it: a human is asked
    assert runs.runs == []
    assert not [r for r in decisions(graph.get_state(cfg()).values["approvals"]) if r["decision"] == "approved"]
    approve_shown(graph)
    log = [(r["kind"], r["decision"], r["by"]) for r in decisions(graph.get_state(cfg()).values["approvals"])]
    assert log == [("plan", "approved", "human")]


# -- 5. a new run starts clean ---------------------------------------------------------------------------------


def test_new_run_resets_every_key_of_the_state_but_the_kept_ones() -> None:
    keys = set(PlanModeState.__annotations__)
    reset = set(new_run({}, {}, "r"))
    assert keys == reset | KEPT_ACROSS_RUNS, (keys - reset - KEPT_ACROSS_RUNS, reset - keys)
    assert not reset & KEPT_ACROSS_RUNS


def test_a_run_abandoned_at_a_question_leaves_no_approval_to_the_next_task(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph = _write_graph(checkpointer, runs)
    graph.invoke({"messages": [("user", "deploy it")]}, cfg(), context={**AUTO, "step_approval": "writes"})
    assert interrupt_of(graph)["type"] == "planmode.step_approval"  # abandoned here
    graph.invoke({"messages": [("user", "deploy it again")]}, cfg(), context={"mode": "plan", "approval": "ask"})
    assert runs.runs == []
    assert interrupt_of(graph)["type"] == "planmode.approval"
    values = graph.get_state(cfg()).values
    assert decisions(values["approvals"]) == []  # the earlier run's records are not this run's


def test_the_key_is_read_from_the_environment_in_the_suite() -> None:
    assert os.environ[approval_key.ENV_KEY].encode() == approval_key.approval_key()
