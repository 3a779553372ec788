"""The plan that runs is the plan a human approved, under an adversary.

- an answer that approves (approve, edit) is bound to the revision shown: a plan changed meanwhile by
  ``update_state`` (a step ``evil`` added) never runs on an edit without a revision or with the old one;
- execution refuses a plan that is not the approved revision (dispatch's check), so a step edited in after
  the approval cannot run unapproved, and stays bound to the approved plan's shape: a step edited in at
  any later boundary is approved before it runs;
- the payload says why it is asked again and what changed since the plan a human last answered;
- a full-plan edit that changes a step's status is refused with a reason;
- a lone surrogate in a plan's text is cleaned where it enters the state, in every structured-output mode.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from planmode.graph import build_graph
from planmode.persistence import sqlite_checkpointer
from planmode.state.approvals import decisions, granted_shape
from planmode.state.models import Step
from planmode.testing.scripted import PurposeScript, ScriptedChatModel, ScriptRequest

TASK = "Collect the numbers, then check them, then write the report"
PLAN = {
    "title": "Numbers",
    "steps": [
        {"id": "a", "description": "collect the numbers"},
        {"id": "b", "description": "check the numbers", "dependencies": ["a"]},
        {"id": "c", "description": "write the report", "dependencies": ["b"]},
    ],
}
EVIL = {"reason": "meanwhile", "add_steps": [{"id": "evil", "description": "rm -rf /", "dependencies": ["a"]}]}
ASK = {"mode": "plan", "approval": "ask"}


class Recorder:
    def __init__(self) -> None:
        self.runs: list[str] = []

    def __call__(self, step: Step, ctx: Any) -> str:
        self.runs.append(step.id)
        return f"{step.id} done"


def cfg(name: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def interrupt_of(graph: Any, name: str = "t") -> dict[str, Any]:
    state = graph.get_state(cfg(name))
    assert len(state.interrupts) == 1, state.next
    value: dict[str, Any] = state.interrupts[0].value
    return value


def started(checkpointer: SqliteSaver, runs: Recorder, **script: Any) -> tuple[Any, dict[str, Any]]:
    model = ScriptedChatModel(responder=PurposeScript(**{"plan": PLAN, **script}))
    graph = build_graph(model, executor=runs, checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ASK)
    return graph, interrupt_of(graph)


RENAME_A = {"update_steps": [{"id": "a", "description": "collect the numbers twice"}]}


@pytest.mark.parametrize("revision", [None, "old"], ids=["edit-without-revision", "edit-with-the-old-revision"])
def test_an_edit_made_while_the_plan_changed_does_not_approve_the_change(
    checkpointer: SqliteSaver, revision: str | None
) -> None:
    """The human reads a, b, c; meanwhile update_state adds ``evil``; the human's edit must not run it."""
    runs = Recorder()
    graph, shown = started(checkpointer, runs)
    graph.update_state(cfg(), {"plan": EVIL})  # the adversary, while the human reads the payload
    answer: dict[str, Any] = {"action": "edit", "patch": RENAME_A}
    if revision == "old":
        answer["revision"] = shown["revision"]

    graph.invoke(Command(resume=answer), cfg())

    state = graph.get_state(cfg())
    assert runs.runs == []
    assert state.next == ("approve",)
    again = interrupt_of(graph)
    assert "revision" in again["error"]
    assert again["revision"] != shown["revision"]
    assert "evil" in [s["id"] for s in again["plan"]["steps"]]
    assert state.values["plan"].get("a").description == "collect the numbers"  # the edit was not applied
    assert state.values.get("approved_revision") is None
    # The human now sees evil (marked as added since the plan answered) and removes it: evil never runs.
    assert again["reason"] == ("the plan was edited (by unknown: added evil); asked again (see error)")
    assert again["changes"]["since_revision"] is None  # no answer was accepted before: nothing to compare
    graph.invoke(
        Command(resume={"action": "edit", "revision": again["revision"], "patch": {"remove_steps": ["evil"]}}), cfg()
    )
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed"
    assert sorted(runs.runs) == ["a", "b", "c"]


def test_an_approve_made_while_the_plan_changed_does_not_approve_the_change(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph, shown = started(checkpointer, runs)
    graph.update_state(cfg(), {"plan": EVIL})
    graph.invoke(Command(resume={"action": "approve", "revision": shown["revision"]}), cfg())
    assert runs.runs == []
    assert "stale revision" in interrupt_of(graph)["error"]


def test_the_payload_shows_what_an_update_state_edit_changed_and_why_it_asks_again(
    checkpointer: SqliteSaver,
) -> None:
    runs = Recorder()
    graph, shown = started(checkpointer, runs)
    assert shown["reason"] == "initial plan"
    assert shown["changes"] == {"since_revision": None, "added": [], "removed": [], "updated": {}, "reordered": False}
    # The human answers (an invalid edit naming the revision shown): that plan is the base of later changes.
    graph.invoke(
        Command(resume={"action": "edit", "revision": shown["revision"], "patch": {"remove_steps": ["ghost"]}}), cfg()
    )
    assert "ghost" in interrupt_of(graph)["error"]
    graph.update_state(
        cfg(),
        {
            "plan": {
                **EVIL,
                "update_steps": [{"id": "c", "description": "write the report as PDF", "dependencies": ["b", "evil"]}],
            }
        },
    )
    graph.invoke(None, cfg())
    payload = interrupt_of(graph)
    assert payload["reason"] == ("the plan was edited (by unknown: added evil, updated c); asked again (see error)")
    assert payload["changes"] == {
        "since_revision": shown["revision"],
        "added": ["evil"],
        "removed": [],
        "updated": {
            "c": {
                "description": ["write the report", "write the report as PDF"],
                "dependencies": [["b"], ["b", "evil"]],
            }
        },
        "reordered": False,
    }
    json.dumps(payload)  # the payload is JSON
    assert runs.runs == []


def test_after_a_reject_the_payload_says_why_and_marks_the_changes(checkpointer: SqliteSaver) -> None:
    revised = {
        "title": "Numbers",
        "steps": [
            {"id": "b", "description": "check the numbers"},
            {"id": "a", "description": "collect the numbers", "dependencies": ["b"]},
            {"id": "d", "description": "publish", "dependencies": ["a"]},
        ],
    }
    runs = Recorder()
    graph, shown = started(checkpointer, runs, plan=[PLAN, revised])
    graph.invoke(Command(resume={"action": "reject", "feedback": "check first, publish instead of c"}), cfg())
    payload = interrupt_of(graph)
    assert payload["reason"] == "revised after your feedback: check first, publish instead of c"
    changes = payload["changes"]
    assert changes["since_revision"] == shown["revision"]
    assert changes["added"] == ["d"] and changes["removed"] == ["c"] and changes["reordered"] is True
    assert changes["updated"] == {"a": {"dependencies": [[], ["b"]]}, "b": {"dependencies": [["a"], []]}}


def test_a_full_plan_edit_that_marks_a_step_done_is_refused_with_a_reason(checkpointer: SqliteSaver) -> None:
    runs = Recorder()
    graph, shown = started(checkpointer, runs)
    edited = {**PLAN, "steps": [{**PLAN["steps"][0], "status": "done"}, *PLAN["steps"][1:]]}
    graph.invoke(Command(resume={"action": "edit", "revision": shown["revision"], "plan": edited}), cfg())
    error = interrupt_of(graph)["error"]
    assert "step 'a': its status cannot be edited (pending -> done)" in error
    assert runs.runs == []
    # a new step given a status is refused too; an unchanged status is fine
    edited = {**PLAN, "steps": [*PLAN["steps"], {"id": "d", "description": "x", "status": "skipped"}]}
    graph.invoke(Command(resume={"action": "edit", "revision": shown["revision"], "plan": edited}), cfg())
    assert "new step 'd': its status cannot be edited" in interrupt_of(graph)["error"]
    edited = {**PLAN, "title": "Numbers, checked", "steps": [{**s, "status": "pending"} for s in PLAN["steps"]]}
    graph.invoke(Command(resume={"action": "edit", "revision": shown["revision"], "plan": edited}), cfg())
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed" and values["plan"].title == "Numbers, checked"


def test_a_step_edited_in_after_the_approval_cannot_run_unapproved(checkpointer: SqliteSaver) -> None:
    """Dispatch checks that the plan it executes is the approved revision: an edit at a breakpoint between
    the approval and execution goes back to the approval, and the edited-in step does not run."""
    runs = Recorder()
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    graph = build_graph(model, executor=runs, checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ASK)
    shown = interrupt_of(graph)
    graph.invoke(
        Command(resume={"action": "approve", "revision": shown["revision"]}), cfg(), interrupt_before=["dispatch"]
    )  # a breakpoint right after the approval
    state = graph.get_state(cfg())
    granted = decisions(state.values["approvals"])[-1]
    assert state.next == ("dispatch",) and (granted["revision"], granted["by"]) == (shown["revision"], "human")
    graph.update_state(cfg(), {"plan": EVIL})
    assert graph.get_state(cfg()).next == ("dispatch",)

    graph.invoke(None, cfg())

    assert runs.runs == []
    payload = interrupt_of(graph)
    assert payload["error"] == "the plan changed after it was approved; review it again"
    assert payload["reason"] == ("the plan was edited (by unknown: added evil); asked again (see error)")
    assert "evil" in [s["id"] for s in payload["plan"]["steps"]]
    assert payload["changes"]["added"] == ["evil"]
    graph.invoke(
        Command(resume={"action": "edit", "revision": payload["revision"], "patch": {"remove_steps": ["evil"]}}), cfg()
    )
    assert graph.get_state(cfg()).values["status"] == "completed"
    assert "evil" not in runs.runs and sorted(runs.runs) == ["a", "b", "c"]


# -- lone surrogates ----------------------------------------------------------------------------------------

BAD = "Numbers \ud800 report"  # a lone surrogate, as a model's JSON escape "\\ud800" decodes
CLEAN = "Numbers \ufffd report"


def _plan_with_surrogates() -> dict[str, Any]:
    return {
        "title": BAD,
        "steps": [
            {"id": "a", "description": f"collect {BAD}", "acceptance": "ok \udfff", "tools": ["t\ud83d"]},
            {"id": "b", "description": "pair \ud83d\ude00 kept", "dependencies": ["a"]},
        ],
    }


@pytest.mark.parametrize("shape", ["tool-call", "json-text"])
def test_a_lone_surrogate_from_the_planner_is_cleaned_once_and_shown_as_it_runs(tmp_path: Path, shape: str) -> None:
    plan = _plan_with_surrogates()
    reply: Any = plan if shape == "tool-call" else json.dumps(plan)  # json.dumps escapes it as \ud800

    def planner(req: ScriptRequest) -> Any:
        return reply

    def executor(step: Step, ctx: Any) -> str:
        return f"done \udc80 {step.id}"  # an executor's text with a lone surrogate too

    saver = sqlite_checkpointer(tmp_path / "runs.sqlite")
    model = ScriptedChatModel(responder=PurposeScript(plan=planner))
    graph = build_graph(model, executor=executor, checkpointer=saver)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context={**ASK, "structured_output": "tool_calling"})
    payload = interrupt_of(graph)
    assert payload["plan"]["title"] == CLEAN
    assert payload["plan"]["steps"][0]["acceptance"] == "ok \ufffd"
    assert payload["plan"]["steps"][0]["tools"] == ["t\ufffd"]
    assert payload["plan"]["steps"][1]["description"] == "pair \U0001f600 kept"
    assert CLEAN in payload["markdown"]
    saver.conn.close()

    # A new process: what was stored is what was shown, not "?".
    saver = sqlite_checkpointer(tmp_path / "runs.sqlite")
    graph = build_graph(model, executor=executor, checkpointer=saver)
    again = graph.get_state(cfg())
    assert again.values["plan"].title == CLEAN
    assert again.values["plan"].revision == payload["revision"]
    # A human edit with a lone surrogate is cleaned the same way, then approved and run.
    graph.invoke(
        Command(
            resume={
                "action": "edit",
                "revision": payload["revision"],
                "patch": {"reason": "why \ud800", "title": "T \udbff"},
            }
        ),
        cfg(),
    )
    values = graph.get_state(cfg()).values
    assert values["status"] == "completed", values.get("error")
    assert values["plan"].title == "T \ufffd"
    assert values["plan"].history[-1].reason == "why \ufffd"
    assert values["plan"].get("a").result is not None and "\ufffd" in values["plan"].get("a").result
    saver.conn.close()


def test_a_lone_surrogate_in_reject_feedback_reaches_the_planner_cleaned(checkpointer: SqliteSaver) -> None:
    model = ScriptedChatModel(responder=PurposeScript(plan=[PLAN, {**PLAN, "title": "Short"}]))
    graph = build_graph(model, executor=Recorder(), checkpointer=checkpointer)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=ASK)
    graph.invoke(Command(resume={"action": "reject", "feedback": "shorter \ud800 please"}), cfg())
    assert graph.get_state(cfg()).values["plan"].history[-1].reason == "human feedback: shorter \ufffd please"
    assert "shorter \ufffd please" in [r for r in model.requests if r.purpose == "plan"][1].text()
    assert interrupt_of(graph)["reason"] == "revised after your feedback: shorter \ufffd please"


@pytest.mark.integration
def test_a_lone_surrogate_in_tool_call_arguments_over_http_is_cleaned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real ChatOpenAI client against the scripted OpenAI-compatible server: the JSON escape ``\\ud800``
    in a plan's title (tool-call arguments) reaches the approval cleaned, and is stored as shown.

    (In json_schema mode the openai SDK's strict JSON parser refuses such a body before planmode sees it:
    the planner then retries; that path is llm.py's.)"""
    mode = "tool_calling"
    from planmode.testing.openai_server import ScriptedOpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    plan = _plan_with_surrogates()

    def respond(body: dict[str, Any]) -> Any:
        first = str(body["messages"][0].get("content") or "")
        if not first.startswith("planmode:plan"):
            return "nothing to explore"
        if body.get("tool_choice") and body.get("tools"):
            return {"tool_calls": [{"name": body["tools"][0]["function"]["name"], "arguments": plan}]}
        return json.dumps(plan)

    with ScriptedOpenAIServer(respond) as srv:
        saver = sqlite_checkpointer(tmp_path / "runs.sqlite")
        graph = build_graph(checkpointer=saver, executor=lambda step, ctx: "ok")
        graph.invoke(
            {"messages": [("user", TASK)]},
            cfg(),
            context={**ASK, "base_url": srv.base_url, "model": "scripted", "structured_output": mode},
        )
        payload = interrupt_of(graph)
        assert payload["plan"]["title"] == CLEAN
        assert payload["plan"]["steps"][1]["description"] == "pair \U0001f600 kept"
        saver.conn.close()
    reopened = build_graph(checkpointer=sqlite_checkpointer(tmp_path / "runs.sqlite"))
    assert reopened.get_state(cfg()).values["plan"].revision == payload["revision"]


@pytest.mark.parametrize(
    ("patch", "error"),
    [
        (
            {"update_steps": [{"id": "a", "status": "done"}]},
            "invalid edit: update_steps.0.status: Input should be 'pending' or 'skipped'",
        ),
        (
            {"add_steps": [{"id": "d", "description": "new", "status": "done"}]},
            "new step 'd': a new step starts pending, its status cannot be set (done)",
        ),
    ],
    ids=["update-to-done", "new-step-done"],
)
def test_a_patch_edit_that_marks_a_step_done_is_refused_with_a_reason(
    checkpointer: SqliteSaver, patch: dict[str, Any], error: str
) -> None:
    runs = Recorder()
    graph, shown = started(checkpointer, runs)
    graph.invoke(Command(resume={"action": "edit", "revision": shown["revision"], "patch": patch}), cfg())
    assert error in interrupt_of(graph)["error"]
    assert runs.runs == [] and graph.get_state(cfg()).values["plan"].version == 1


def test_a_new_task_on_the_same_thread_is_an_initial_plan_again(checkpointer: SqliteSaver) -> None:
    second = {"title": "Other", "steps": [{"id": "x", "description": "something else"}]}
    runs = Recorder()
    graph, shown = started(checkpointer, runs, plan=[PLAN, second])
    graph.invoke(Command(resume={"action": "approve", "revision": shown["revision"]}), cfg())
    assert graph.get_state(cfg()).values["approval_base"]["revision"] == shown["revision"]
    graph.invoke({"messages": [("user", "Now do something else, then report")]}, cfg(), context=ASK)
    payload = interrupt_of(graph)
    assert [s["id"] for s in payload["plan"]["steps"]] == ["x"]
    assert payload["reason"] == "initial plan"
    assert payload["changes"]["since_revision"] is None and payload["changes"]["removed"] == []


# -- execution stays bound to the approved plan -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("breakpoint", "after_steps"),
    [("execute_step", 0), ("verify", 0), ("execute_step", 1)],
    ids=["before-the-first-step", "before-its-verification", "before-a-later-step"],
)
def test_a_step_edited_in_during_execution_runs_only_after_a_human_approves_it(
    checkpointer: SqliteSaver, breakpoint: str, after_steps: int
) -> None:
    """The approval binds the whole execution, not just its start: a step added by ``update_state`` at any
    boundary after the approval (the first batch already started) is shown at the approval before it can
    run; the human removes it and it never runs, or approves it and it runs once."""
    for answer in ("remove", "approve"):
        runs = Recorder()
        model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
        graph = build_graph(model, executor=runs, checkpointer=checkpointer)
        name = f"{breakpoint}-{after_steps}-{answer}"
        graph.invoke({"messages": [("user", TASK)]}, cfg(name), context=ASK)
        shown = interrupt_of(graph, name)
        resume = Command(resume={"action": "approve", "revision": shown["revision"]})
        graph.invoke(resume, cfg(name), interrupt_before=[breakpoint])
        for _ in range(after_steps):
            graph.invoke(None, cfg(name), interrupt_before=[breakpoint])
        assert graph.get_state(cfg(name)).next == (breakpoint,)
        values = graph.get_state(cfg(name)).values
        assert granted_shape(values["approvals"]) == values["plan"].shape  # the approval grants this very plan

        graph.update_state(cfg(name), {"plan": EVIL})  # evil depends on a
        graph.invoke(None, cfg(name))

        assert "evil" not in runs.runs
        payload = interrupt_of(graph, name)
        assert payload["error"] == "the plan changed after it was approved; review it again"
        assert payload["changes"]["added"] == ["evil"]
        if answer == "remove":
            patch = {"remove_steps": ["evil"]}
            graph.invoke(Command(resume={"action": "edit", "revision": payload["revision"], "patch": patch}), cfg(name))
        else:
            graph.invoke(Command(resume={"action": "approve", "revision": payload["revision"]}), cfg(name))
        assert graph.get_state(cfg(name)).values["status"] == "completed"
        expected = ["a", "b", "c"] if answer == "remove" else ["a", "b", "c", "evil"]
        assert sorted(runs.runs) == expected, answer  # every step once: the approved ones, and only those


def test_a_patch_that_adds_a_step_is_decided_by_the_policy_not_the_settings(checkpointer: SqliteSaver) -> None:
    """A patch that adds a step (``reapprove_patches`` off, a needs_adjustment reflection) is not approved by the
    settings: the policy decides it, here a human (``approval="ask"``), and the added step runs only after the
    answer. (A patch that adds no step and no write tool goes on without asking:
    ``tests/graph/nodes/test_guard_bindings.py``.)"""
    from tests.graph.nodes.test_graph_repair import FIX_PATCH, NEEDS_ADJUSTMENT, Counting
    from tests.graph.nodes.test_graph_repair import PLAN as SERVICE

    counting = Counting()
    model = ScriptedChatModel(responder=PurposeScript(plan=SERVICE, reflect=NEEDS_ADJUSTMENT, patch=FIX_PATCH))
    graph = build_graph(model, checkpointer=checkpointer, executor=counting.execute, verifier=counting.verify)
    context = {**ASK, "max_attempts": 1}
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context=context)
    shown = interrupt_of(graph)
    graph.invoke(Command(resume={"action": "approve", "revision": shown["revision"]}), cfg())

    again = interrupt_of(graph)
    assert "fix_b" in [s["id"] for s in again["plan"]["steps"]] and "fix_b" not in counting.runs
    assert [r for r in decisions(graph.get_state(cfg()).values["approvals"]) if r["kind"] == "patch"] == []
    graph.invoke(Command(resume={"action": "approve", "revision": again["revision"]}), cfg())
    state = graph.get_state(cfg())
    assert not state.interrupts
    assert state.values["status"] == "completed"
    assert counting.runs["fix_b"] == 1
    assert granted_shape(state.values["approvals"]) == state.values["plan"].shape  # the human's grant


def test_a_step_edited_in_before_a_patch_is_not_approved_by_the_patch(checkpointer: SqliteSaver) -> None:
    """A patch applied without re-approval rebinds execution to the patched plan, but only when the plan it
    patched was the approved one: a step added by ``update_state`` just before the patch (a breakpoint at
    patch) still waits for a human."""
    from tests.graph.nodes.test_graph_repair import FIX_PATCH, NEEDS_ADJUSTMENT, Counting
    from tests.graph.nodes.test_graph_repair import PLAN as SERVICE

    counting = Counting()
    model = ScriptedChatModel(responder=PurposeScript(plan=SERVICE, reflect=NEEDS_ADJUSTMENT, patch=FIX_PATCH))
    graph = build_graph(model, checkpointer=checkpointer, executor=counting.execute, verifier=counting.verify)
    graph.invoke({"messages": [("user", TASK)]}, cfg(), context={**ASK, "max_attempts": 1})
    shown = interrupt_of(graph)
    graph.invoke(
        Command(resume={"action": "approve", "revision": shown["revision"]}), cfg(), interrupt_before=["patch"]
    )
    assert graph.get_state(cfg()).next == ("patch",)
    graph.update_state(cfg(), {"plan": EVIL})

    graph.invoke(None, cfg())

    assert "evil" not in counting.runs
    payload = interrupt_of(graph)
    assert "evil" in [s["id"] for s in payload["plan"]["steps"]]
    assert [r for r in decisions(graph.get_state(cfg()).values["approvals"]) if r["kind"] == "patch"] == []
    patch = {"remove_steps": ["evil"]}
    graph.invoke(Command(resume={"action": "edit", "revision": payload["revision"], "patch": patch}), cfg())
    assert graph.get_state(cfg()).values["status"] == "completed"
    assert "evil" not in counting.runs and counting.runs["fix_b"] == 1
