"""Typed routers for the nodes whose next step follows from state.

plan, approve, dispatch, reflect and patch return only what they change; these routers read the route from
the state they left. That matters whenever a human edits the state between two nodes (``update_state``, as
LangGraph Studio does, at an approval, at an ``interrupt_before`` breakpoint, or after a crash): LangGraph
then re-runs the router of the node that wrote last, so the run goes on from the edited state. With a
``Command(goto=...)`` the edit's checkpoint would have no route at all, the pending ``Send`` tasks would be
dropped, and the run would stay "running" with nothing to do, for good.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.types import Send

from planmode.nodes._batch import find_trouble
from planmode.nodes._deps import settings_of
from planmode.nodes.dispatch import dispatch_sends
from planmode.state.graph_state import PlanModeState
from planmode.state.models import Plan, StepStatus

S = StepStatus

__all__ = [
    "route_after_approve",
    "route_after_dispatch",
    "route_after_patch",
    "route_after_plan",
    "route_after_reflect",
    "route_after_respond",
]


def route_after_plan(state: PlanModeState) -> Literal["approve", "finalize", "model_unavailable"]:
    """A valid plan goes to approval; a planner that gave up ends the run; one without a model pauses."""
    if state.get("status") == "model_unavailable":
        return "model_unavailable"
    return "finalize" if state.get("status") in ("failed", "cancelled") else "approve"


def route_after_approve(
    state: PlanModeState,
) -> list[Send] | Literal["dispatch", "plan", "approve", "reflect", "finalize", "verify", "model_unavailable"]:
    """Approved (or edited): execute. Rejected: plan again. Cancelled: finish. Otherwise ask again.

    Approved, the run routes as dispatch would: a ``Send`` per running step (an approval the policy gave started
    the first batch itself), else dispatch (after a human's approval). execute_step checks every step it is
    sent against the approval record either way."""
    status = state.get("status")
    if status == "cancelled":
        return "finalize"
    if status == "planning":
        return "plan"
    if state.get("approval_error") or state.get("needs_approval") or status == "awaiting_approval":
        return "approve"
    return route_after_dispatch(state)


def route_after_patch(state: PlanModeState) -> Literal["dispatch", "approve", "finalize", "model_unavailable"]:
    """A patch that needs approval goes to approve; a failed repair ends the run; otherwise execute."""
    if state.get("status") == "model_unavailable":
        return "model_unavailable"
    if state.get("status") in ("failed", "cancelled"):  # cancelled: stopped at the budget
        return "finalize"
    return "approve" if state.get("needs_approval") else "dispatch"


def route_after_dispatch(
    state: PlanModeState,
) -> list[Send] | Literal["approve", "reflect", "finalize", "verify", "dispatch", "model_unavailable"]:
    """One ``Send`` to execute_step per running step without an outcome; otherwise where the plan says.

    After dispatch itself this finds exactly the batch it marked running. After an edit through
    ``update_state`` (which LangGraph applies "as" dispatch when dispatch wrote last) it finds what the
    edited plan needs: the running steps again, verify for outcomes not judged yet, reflect for trouble,
    finalize when every step is finished, or dispatch again to start the steps the edit made ready.
    """
    if state.get("unavailable"):  # a step or its verification could not reach the model: pause
        return "model_unavailable"
    if state.get("status") == "cancelled":  # stopped at the budget (planmode.budget)
        return "finalize"
    plan = state.get("plan")
    if not isinstance(plan, Plan) or plan.version == 0:
        return "finalize" if state.get("status") == "failed" else "dispatch"
    if state.get("needs_approval") or state.get("approval_error"):
        return "approve"
    # Reflect and finalize read what dispatch wrote (the trouble, the status): go there only when dispatch
    # wrote it for this very plan; after an edit that changed the picture, dispatch looks again.
    if plan.is_complete:
        return "finalize" if state.get("status") == "completed" else "dispatch"
    trouble = find_trouble(plan)
    if trouble:
        return "reflect" if state.get("trouble") == trouble else "dispatch"
    outcomes = state.get("step_outcomes") or {}
    if any(s.id in outcomes for s in plan.by_status(S.RUNNING)):
        return "verify"  # an edit landed between execute_step and verify: judge the outcomes first
    # The bound kept in state (a router has no runtime context when it runs for an update_state)
    sends = dispatch_sends(state, settings_of(state, None).max_parallel)
    return sends if sends else "dispatch"


def route_after_reflect(state: PlanModeState) -> Literal["dispatch", "patch", "finalize", "model_unavailable"]:
    """A run reflect ended goes to finalize; an adjustment to patch; otherwise dispatch (a retry); one whose
    model could not be reached pauses."""
    if state.get("status") == "model_unavailable":
        return "model_unavailable"
    if state.get("status") in ("failed", "completed", "cancelled"):
        return "finalize"
    reflection: Any = state.get("reflection") or {}
    if isinstance(reflection, dict) and reflection.get("assessment") in ("needs_adjustment", "off_track"):
        return "patch"
    return "dispatch"


def route_after_respond(state: PlanModeState) -> Literal["model_unavailable", "__end__"]:
    """The direct answer ends the run (``"__end__"`` is LangGraph's END), unless the model could not be
    reached (the run pauses)."""
    return "model_unavailable" if state.get("status") == "model_unavailable" else "__end__"
