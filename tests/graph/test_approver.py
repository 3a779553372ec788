"""Who approved: recorded in the plan's history (by the plan reducer) and in the run report, from the server's
authenticated user or the local user (`planmode.approval.approver`)."""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from planmode.approval.approver import ANONYMOUS, approver
from planmode.graph import build_graph
from planmode.state.models import Plan, PlanPatch, Step
from planmode.state.reducer import PlanUpdate, plan_reducer
from planmode.testing.scripted import PurposeScript, ScriptedChatModel

TASK = "Ship it: build the package, then upload it"
PLAN = {
    "title": "Ship",
    "steps": [
        {"id": "build", "description": "build the package"},
        {"id": "upload", "description": "upload it", "dependencies": ["build"]},
    ],
}


def _plan() -> Plan:
    first = plan_reducer(None, Plan(goal="g", steps=[Step(id="a", description="do a")]))
    assert first is not None
    return first


@dataclass
class _User:
    identity: str
    permissions: tuple[str, ...] = ()


# -- the reducer --------------------------------------------------------------------------------------------


def test_an_approval_alone_is_a_history_record_that_changes_nothing_else() -> None:
    plan = _plan()
    out = plan_reducer(plan, PlanUpdate(source="approval", approved_by="alice", expected_revision=plan.revision))
    assert out is not None
    assert out.revision == plan.revision and out.version == plan.version and out.steps == plan.steps
    assert len(out.history) == len(plan.history) + 1
    record = out.history[-1]
    assert (record.source, record.version, record.approved_by) == ("approval", plan.version, "alice")
    assert record.reason == f"approved revision {plan.revision}"
    assert not out.rejections


def test_an_edit_given_as_the_approval_names_the_approver_on_its_own_record() -> None:
    plan = _plan()
    patch = PlanPatch.model_validate({"add_steps": [{"id": "b", "description": "do b"}], "reason": "more"})
    out = plan_reducer(plan, PlanUpdate(patch=patch, source="human", approved_by="bob"))
    assert out is not None and out.version == plan.version + 1
    assert [(r.source, r.approved_by) for r in out.history] == [("unknown", None), ("human", "bob")]


def test_a_stale_approval_is_refused_and_records_no_approver() -> None:
    plan = _plan()
    out = plan_reducer(plan, PlanUpdate(source="approval", approved_by="mallory", expected_revision="0" * 16))
    assert out is not None
    assert out.history == plan.history
    assert out.rejections and "stale edit" in out.rejections[-1].reasons[0]


def test_a_hostile_approver_name_is_cleaned_and_bounded() -> None:
    plan = _plan()
    out = plan_reducer(plan, PlanUpdate(source="approval", approved_by="[b]x\ud800" + "y" * 500))
    assert out is not None
    who = out.history[-1].approved_by
    assert who is not None and who.startswith("[b]x\ufffd") and len(who) == 200


# -- who is the approver ------------------------------------------------------------------------------------


def test_the_approver_is_the_servers_authenticated_user() -> None:
    assert approver({"configurable": {"langgraph_auth_user": _User("alice"), "langgraph_request_id": "r"}}) == "alice"
    assert approver({"configurable": {"langgraph_auth_user": {"identity": "carol"}}}) == "carol"


def test_a_server_without_auth_records_anonymous_not_its_own_os_user() -> None:
    assert approver({"configurable": {"langgraph_auth_user": None, "langgraph_request_id": "r"}}) == ANONYMOUS
    assert approver({"configurable": {"langgraph_auth_user": _User("  "), "langgraph_auth_user_id": ""}}) == ANONYMOUS


def test_in_process_the_approver_is_the_local_user() -> None:
    assert approver({"configurable": {"thread_id": "t"}}) == getpass.getuser()
    assert approver({}) == getpass.getuser()
    assert approver() == getpass.getuser()  # outside a run


# -- through the graph --------------------------------------------------------------------------------------


def _graph(checkpointer: SqliteSaver) -> Any:
    model = ScriptedChatModel(responder=PurposeScript(plan=PLAN))
    return build_graph(
        model, executor=lambda s, c: f"did {s.id}", verifier=lambda s, o, c: True, checkpointer=checkpointer
    )


def test_the_approver_of_a_resume_is_in_the_history_and_the_report(checkpointer: SqliteSaver) -> None:
    graph = _graph(checkpointer)
    cfg: Any = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"messages": [("user", TASK)]}, cfg, context={"mode": "plan"})
    revision = graph.get_state(cfg).interrupts[0].value["revision"]
    # as the server passes it: the user of the request that resumes
    server_cfg: Any = {"configurable": {"thread_id": "t1", "langgraph_auth_user": _User("alice")}}
    graph.invoke(Command(resume={"action": "approve", "revision": revision}), server_cfg)
    values = graph.get_state(cfg).values
    assert values["status"] == "completed"
    assert [(r.source, r.approved_by) for r in values["plan"].history] == [("planner", None), ("approval", "alice")]
    assert values["report"]["approvals"] == [{"version": 1, "by": "alice", "edited": False}]
    assert values["report"]["patches"] == []  # an approval is not a patch


def test_an_edit_at_the_approval_records_the_local_user(checkpointer: SqliteSaver) -> None:
    graph = _graph(checkpointer)
    cfg: Any = {"configurable": {"thread_id": "t2"}}
    graph.invoke({"messages": [("user", TASK)]}, cfg, context={"mode": "plan"})
    revision = graph.get_state(cfg).interrupts[0].value["revision"]
    edit = {"reason": "check", "add_steps": [{"id": "check", "description": "check it", "dependencies": ["upload"]}]}
    graph.invoke(Command(resume={"action": "edit", "revision": revision, "patch": edit}), cfg)
    values = graph.get_state(cfg).values
    assert values["status"] == "completed"
    assert values["report"]["approvals"] == [{"version": 2, "by": getpass.getuser(), "edited": True}]
    assert [p["source"] for p in values["report"]["edits"]] == ["human"]
    assert values["report"]["patches"] == []  # a human edit is not a repair patch (issue 23, item 15)


def test_an_automatic_approval_records_no_approver(checkpointer: SqliteSaver) -> None:
    graph = _graph(checkpointer)
    cfg: Any = {"configurable": {"thread_id": "t3"}}
    graph.invoke({"messages": [("user", TASK)]}, cfg, context={"mode": "plan", "approval": "auto"})
    values = graph.get_state(cfg).values
    assert values["status"] == "completed" and values["report"]["approvals"] == []
