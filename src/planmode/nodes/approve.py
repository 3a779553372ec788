"""approve: the one place a plan is approved — by the approval policy, or by a human at the interrupt.

The node, in order:

1. an open staleness or per-step question (set by dispatch: `planmode.nodes._gates`) is asked first;
2. the approval policy decides the plan (`planmode.approval.policy`; default `from_settings`, the ``approval`` setting).
   It is the only decider: ``approve`` writes a grant ``by: policy``; ``reject`` cancels the run; ``ask`` (or a
   policy that fails) asks a human;
3. a human answers the ``planmode.approval`` interrupt (`planmode.approval`): approve and edit name the
   revision they were made against; the grant they write covers exactly the plan shown (or as edited),
   ``by: human``.

A grant (`planmode.state.approvals`) is what execute_step checks before any step runs; under
``step_approval="writes"`` it holds every step that uses a tool that changes things for its own answer.
Nothing with side effects runs before ``interrupt()`` (the node re-runs from its start on resume): the
workspace fingerprint (`planmode.approval.staleness`) is taken after the answer. The node returns only what it
changes; `route_after_approve` reads the route from state, so an edit during the interrupt is asked again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from langchain_core.tools import BaseTool
from langgraph.types import interrupt

from planmode._compat import RunnableCallable
from planmode.approval import Approve, Cancel, Edit, Reject, approval_payload, approval_reason, parse_resume
from planmode.approval.approver import approver
from planmode.approval.policy import ApprovalRequest, decide, from_settings, policy_name, read_only_tools_of
from planmode.approval.staleness import fingerprint
from planmode.budget import approval_budget, approval_markdown
from planmode.checks import approval_checks
from planmode.checks import approval_markdown as checks_markdown
from planmode.context import PlanModeContext
from planmode.nodes._batch import checked_now, gates_may_stop, next_batch
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate, settings_of
from planmode.nodes._gates import ask_stale, ask_step, write_holds
from planmode.nodes._twin import Body, call, twin_node
from planmode.observability.events import emit
from planmode.state.approvals import add_approval_records, grant, record
from planmode.state.diff import plan_changes, plan_snapshot
from planmode.state.graph_state import PlanModeState
from planmode.state.models import Plan, PlanSource
from planmode.state.reducer import PlanUpdate, preview

__all__ = ["make_approve"]


def make_approve(deps: Deps, policy: Any = None) -> RunnableCallable:
    """Build the approve node with its approval policy (default: the ``approval`` setting)."""
    chosen = policy if policy is not None else from_settings
    name = policy_name(chosen)
    read_only = read_only_tools_of(deps.tools)

    def approve(state: PlanModeState, runtime: NodeRuntime) -> Body[StateUpdate]:
        settings = settings_of(state, runtime)
        plan = state.get("plan")
        if not isinstance(plan, Plan) or plan.version == 0:
            return {"approval_error": None, "status": "planning"}
        stale = state.get("stale")
        if isinstance(stale, dict):
            return ask_stale(state, plan, stale, name)
        gate = state.get("step_gate")
        if isinstance(gate, dict):
            return ask_step(state, settings, plan, gate, name)
        base = state.get("approval_base")
        if not isinstance(base, dict) or base.get("goal") != plan.goal:  # none yet, or another run's plan
            base = None
        error = state.get("approval_error")
        reason = approval_reason(plan, base, error=error)
        request = ApprovalRequest(
            kind="plan", subject=plan, reason=reason, settings=settings, read_only_tools=read_only
        )
        decision, failure = decide(chosen, request)
        asked = _Approving(state, settings, plan, name, read_only, reason, failure)
        if decision.action == "approve":
            said = "approved automatically" + ("" if chosen is from_settings else f" by the policy {name}")
            return (yield from _policy_approval(asked, said))
        if decision.action == "reject":
            return _policy_rejection(asked, decision.reason)
        payload = yield from _human_question(asked, deps.tools, base, error)
        answer = interrupt(payload)
        return (yield from _human_answer_update(asked, answer))

    return twin_node("approve", approve)


@dataclass(frozen=True)
class _Approving:
    """What the approval of one plan is decided with: the run's state and settings, the plan, the policy's name,
    the read-only tools, the reason it is asked, and why the policy failed (None: it answered)."""

    state: PlanModeState
    settings: PlanModeContext
    plan: Plan
    name: str
    read_only: frozenset[str]
    reason: str
    failure: str | None

    @property
    def log(self) -> Any:
        """The run's approval log."""
        return self.state.get("approvals")

    def holds(self, plan: Plan) -> list[str]:
        """The steps of ``plan`` a grant holds for their own answer (`write_holds`)."""
        return write_holds(plan, self.settings, self.read_only)


def _fingerprint_update(state: PlanModeState, settings: PlanModeContext) -> Body[StateUpdate]:
    """The workspace fingerprint taken at an approval (nothing when the check is off or there is none)."""
    if not settings.check_staleness:
        return {}
    paths = list(state.get("explored_paths") or [])
    fp = yield from call(
        lambda: fingerprint(settings.workspace, paths),
        lambda: asyncio.to_thread(fingerprint, settings.workspace, paths),
    )
    if fp is None:
        return {}
    return {"workspace_fingerprint": fp, "fingerprint_checked": checked_now()}


def _policy_approval(asked: _Approving, said: str) -> Body[StateUpdate]:
    """The update of a plan the policy approved: its grant, the fingerprint, and the first batch when no gate may
    stop it."""
    plan, log, state = asked.plan, asked.log, asked.state
    emit("plan_approved", said, plan_version=plan.version, revision=plan.revision)
    approved: StateUpdate = {
        "needs_approval": False,
        "approval_error": None,
        "status": "running",
        "approvals": [
            grant(log, "plan", plan, policy=asked.name, by="policy", hold=asked.holds(plan), reason=asked.reason)
        ],
        **(yield from _fingerprint_update(state, asked.settings)),
    }
    after = {**state, **approved, "approvals": add_approval_records(log, approved["approvals"])}
    return {**approved, **_first_batch(cast(PlanModeState, after), asked.settings)}


def _policy_rejection(asked: _Approving, why: str) -> StateUpdate:
    """The update of a plan the policy rejected: the run is cancelled, with the policy's reason."""
    plan = asked.plan
    emit("plan_cancelled", why, plan_version=plan.version)
    return {
        "status": "cancelled",
        "feedback": f"rejected by the approval policy {asked.name}: {why}",
        "needs_approval": False,
        "approval_error": None,
        "approvals": [record(asked.log, "plan", "rejected", asked.name, "policy", plan, reason=why)],
    }


def _human_question(
    asked: _Approving, tools: Sequence[BaseTool], base: dict[str, Any] | None, error: Any
) -> Body[dict[str, Any]]:
    """The interrupt payload that asks a human about the plan: the plan, what changed since ``base``, the read-only
    tools, the checks that will run, the earlier run and the budget estimate."""
    plan, state, settings = asked.plan, asked.state, asked.settings
    payload = approval_payload(plan, error=error, reason=asked.reason, changes=plan_changes(base, plan))
    payload["read_only_tools"] = sorted(asked.read_only)  # the CLI marks every other tool a step names as a write
    open_steps = [s for s in plan.steps if s.status.value != "done"]
    checks = partial(approval_checks, open_steps, tools, settings)  # may probe bubblewrap once: a thread
    payload["checks"] = yield from call(checks, partial(asyncio.to_thread, checks))  # what will run, and where
    payload["markdown"] += "\n\n" + checks_markdown(payload["checks"])
    if state.get("earlier"):  # the run this one follows: shown with the plan
        payload["earlier"] = state.get("earlier")
    if settings.max_tokens or settings.max_cost or state.get("usage"):  # the estimate beside the budget
        payload["budget"] = approval_budget(plan, state, settings)
        payload["markdown"] += "\n\n" + approval_markdown(payload["budget"])
    return payload


def _human_answer_update(asked: _Approving, answer: Any) -> Body[StateUpdate]:
    """The update a human's answer to the approval interrupt makes: an unreadable answer is an error shown with the
    plan again; a rejection goes back to planning; a cancellation ends the run; an edit or an approval is a grant
    by the human."""
    plan, log, name = asked.plan, asked.log, asked.name
    human = parse_resume(answer, plan)
    if isinstance(human, str):
        named = answer.get("revision") if isinstance(answer, dict) else None
        # the human answered the plan shown now (by its revision): later changes are shown against it
        return {
            "approval_error": human,
            **({"approval_base": plan_snapshot(plan)} if named == plan.revision else {}),
        }
    if isinstance(human, Reject):
        emit("plan_rejected", human.feedback, plan_version=plan.version)
        return {
            "feedback": human.feedback,
            "approval_error": None,
            "status": "planning",
            "approval_base": plan_snapshot(plan),
            "approvals": [record(log, "plan", "rejected", name, "human", plan, feedback=human.feedback)],
        }
    if isinstance(human, Cancel):  # the human leaves plan mode: nothing more is executed
        emit("plan_cancelled", human.feedback, plan_version=plan.version)
        return {
            "status": "cancelled",
            "feedback": human.feedback or None,
            "approval_error": None,
            "needs_approval": False,
            "approvals": [record(log, "plan", "cancelled", name, "human", plan, feedback=human.feedback)],
        }
    who = approver()  # after interrupt(): the user of the run that resumed it
    if isinstance(human, Edit):
        return (yield from _human_edit_update(asked, human, who))
    assert isinstance(human, Approve)
    emit("plan_approved", "approved", plan_version=plan.version, revision=human.revision, approved_by=who)
    return {
        "plan": PlanUpdate(source=PlanSource.APPROVAL, expected_revision=human.revision, approved_by=who),
        "needs_approval": False,
        "approval_error": None,
        "status": "running",
        "approval_base": plan_snapshot(plan),
        "approvals": [
            grant(
                log,
                "plan",
                plan,
                policy=name,
                by="human",
                who=who,
                hold=asked.holds(plan),
                reason=asked.reason,
                policy_error=asked.failure,
            )
        ],
        **(yield from _fingerprint_update(asked.state, asked.settings)),
    }


def _human_edit_update(asked: _Approving, human: Edit, who: str) -> Body[StateUpdate]:
    """The update of a plan a human approved with edits: the edit, and a grant that covers the plan as edited."""
    update = PlanUpdate(
        patch=human.patch, source=PlanSource.HUMAN_EDIT, expected_revision=human.revision, approved_by=who
    )
    edited = preview(asked.plan, update).plan or human.plan
    emit(
        "plan_approved",
        "approved with edits",
        plan_version=edited.version,
        revision=edited.revision,
        approved_by=who,
    )
    approvals = grant(
        asked.log,
        "plan",
        edited,
        policy=asked.name,
        by="human",
        decision="edited",
        who=who,
        hold=asked.holds(edited),
        reason=asked.reason,
        policy_error=asked.failure,
    )
    return {
        "plan": update,
        "approval_base": plan_snapshot(edited),
        "needs_approval": False,
        "approval_error": None,
        "status": "running",
        "approvals": [approvals],
        **(yield from _fingerprint_update(asked.state, asked.settings)),
    }


def _first_batch(approved: PlanModeState, settings: PlanModeContext) -> StateUpdate:
    """An approval the policy gave (no human, no plan change) starts the first batch in the same super-step, as
    verify starts the later ones (`next_batch`): one checkpointed super-step fewer per run. Nothing when a gate
    around dispatch may stop the batch: dispatch then decides."""
    if gates_may_stop(approved, settings):
        return {}
    return next_batch(approved, approved.get("plan"), settings.max_parallel)
