"""approve: the human-in-the-loop interrupt. Nothing with side effects runs before ``interrupt()``: the
node re-runs from its start on resume.

The node returns only what it changes; `route_after_approve` reads the route from state. So a human who
edits the state during the interrupt (``update_state``, as Studio does) is asked again, not dropped.

The payload's ``changes`` compare the plan with ``approval_base`` (state): the plan a human last answered
with its revision (approve, edit), rejected, or approved. The node writes it when it returns after an
answer; a refused answer that names a stale revision (or none) keeps the old base, since the human did not
answer the plan shown now. An edit is written with ``expected_revision`` (the revision shown), so the plan
reducer refuses it, should the plan have changed in between.
"""

from __future__ import annotations

from langgraph._internal._runnable import RunnableCallable  # a node with a sync and an async function
from langgraph.types import interrupt

from planmode.approval import Approve, Cancel, Edit, Reject, approval_payload, approval_reason, parse_resume
from planmode.approver import approver
from planmode.budget import approval_budget, approval_markdown
from planmode.events import emit
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate, settings_of
from planmode.nodes._twin import inline_node
from planmode.state.diff import plan_changes, plan_snapshot
from planmode.state.graph_state import PlanModeState
from planmode.state.models import PlanSource
from planmode.state.reducer import PlanUpdate

__all__ = ["make_approve"]


def make_approve(deps: Deps) -> RunnableCallable:
    """Build the approve node. It has no IO: ``ainvoke`` runs it on the event loop, not in a worker thread."""

    def approve(state: PlanModeState, runtime: NodeRuntime) -> StateUpdate:
        settings = settings_of(state, runtime)
        plan = state.get("plan")
        if plan is None or plan.version == 0:
            return {"approval_error": None, "status": "planning"}
        # Headless policy: everything is approved automatically (off_track patches included).
        if settings.approval == "auto":
            emit("plan_approved", "approved automatically", plan_version=plan.version, revision=plan.revision)
            return {
                "approved_revision": plan.revision,
                "needs_approval": False,
                "approval_error": None,
                "status": "running",
            }
        base = state.get("approval_base")
        if not isinstance(base, dict) or base.get("goal") != plan.goal:  # none yet, or another run's plan
            base = None
        error = state.get("approval_error")
        payload = approval_payload(
            plan, error=error, reason=approval_reason(plan, base, error=error), changes=plan_changes(base, plan)
        )
        if settings.max_tokens or settings.max_cost or state.get("usage"):  # the estimate beside the budget
            payload["budget"] = approval_budget(plan, state, settings)
            payload["markdown"] += "\n\n" + approval_markdown(payload["budget"])
        answer = interrupt(payload)
        decision = parse_resume(answer, plan)
        if isinstance(decision, str):
            named = answer.get("revision") if isinstance(answer, dict) else None
            # the human answered the plan shown now (by its revision): later changes are shown against it
            return {
                "approval_error": decision,
                **({"approval_base": plan_snapshot(plan)} if named == plan.revision else {}),
            }
        if isinstance(decision, Reject):
            emit("plan_rejected", decision.feedback, plan_version=plan.version)
            return {
                "feedback": decision.feedback,
                "approval_error": None,
                "status": "planning",
                "approval_base": plan_snapshot(plan),
            }
        if isinstance(decision, Cancel):  # the human leaves plan mode: nothing more is executed
            emit("plan_cancelled", decision.feedback, plan_version=plan.version)
            return {
                "status": "cancelled",
                "feedback": decision.feedback or None,
                "approval_error": None,
                "needs_approval": False,
            }
        who = approver()  # after interrupt(): the user of the run that resumed it
        if isinstance(decision, Edit):
            emit(
                "plan_approved",
                "approved with edits",
                plan_version=decision.plan.version,
                revision=decision.plan.revision,
                approved_by=who,
            )
            return {
                "plan": PlanUpdate(
                    patch=decision.patch,
                    source=PlanSource.HUMAN_EDIT,
                    expected_revision=decision.revision,
                    approved_by=who,
                ),
                "approved_revision": decision.plan.revision,
                "approval_base": plan_snapshot(decision.plan),
                "needs_approval": False,
                "approval_error": None,
                "status": "running",
            }
        assert isinstance(decision, Approve)
        emit("plan_approved", "approved", plan_version=plan.version, revision=decision.revision, approved_by=who)
        return {
            "plan": PlanUpdate(source=PlanSource.APPROVAL, expected_revision=decision.revision, approved_by=who),
            "approved_revision": decision.revision,
            "needs_approval": False,
            "approval_error": None,
            "status": "running",
            "approval_base": plan_snapshot(plan),
        }

    return inline_node("approve", approve)
