"""approve: the human-in-the-loop interrupt. Nothing with side effects runs before ``interrupt()``: the
node re-runs from its start on resume."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from planmode.approval import Approve, Edit, Reject, approval_payload, parse_resume
from planmode.events import emit
from planmode.nodes._deps import Deps, settings_of
from planmode.state.graph_state import PlanModeState
from planmode.state.reducer import PlanUpdate

__all__ = ["make_approve"]


def make_approve(deps: Deps) -> Any:
    """Build the approve node."""

    def approve(state: PlanModeState, runtime: Runtime[Any]) -> Command[Literal["dispatch", "plan", "approve"]]:
        settings = settings_of(state, runtime)
        plan = state.get("plan")
        if plan is None or plan.version == 0:
            return Command(goto="plan", update={"approval_error": None})
        # Headless policy: everything is approved automatically (off_track patches included).
        if settings.approval == "auto":
            emit("plan_approved", "approved automatically", plan_version=plan.version, revision=plan.revision)
            return Command(goto="dispatch", update={
                "approved_revision": plan.revision, "needs_approval": False, "approval_error": None,
                "status": "running"})
        reason = "re-approval after a patch" if state.get("patches_applied") else "initial plan"
        answer = interrupt(approval_payload(plan, error=state.get("approval_error"), reason=reason))
        decision = parse_resume(answer, plan)
        if isinstance(decision, str):
            return Command(goto="approve", update={"approval_error": decision})
        if isinstance(decision, Reject):
            emit("plan_rejected", decision.feedback, plan_version=plan.version)
            return Command(goto="plan", update={
                "feedback": decision.feedback, "approval_error": None, "status": "planning"})
        if isinstance(decision, Edit):
            emit("plan_approved", "approved with edits", plan_version=decision.plan.version,
                 revision=decision.plan.revision)
            return Command(goto="dispatch", update={
                "plan": PlanUpdate(patch=decision.patch, source="human"),
                "approved_revision": decision.plan.revision,
                "needs_approval": False, "approval_error": None, "status": "running"})
        assert isinstance(decision, Approve)
        emit("plan_approved", "approved", plan_version=plan.version, revision=decision.revision)
        return Command(goto="dispatch", update={
            "approved_revision": decision.revision, "needs_approval": False, "approval_error": None,
            "status": "running"})

    return approve
