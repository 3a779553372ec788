"""Typed routers for the nodes whose next step follows from state.

plan, approve and patch return only what they change; these routers read the route from the state they
left. That matters at the approval interrupt: a human who edits the state meanwhile (``update_state``, as
LangGraph Studio does) re-runs the router of the node that wrote last, and is asked to approve again —
with a ``Command(goto=...)`` the run would end silently instead.
"""

from __future__ import annotations

from typing import Literal

from planmode.state.graph_state import PlanModeState

__all__ = ["route_after_approve", "route_after_patch", "route_after_plan", "route_after_respond"]


def route_after_plan(state: PlanModeState) -> Literal["approve", "finalize", "model_unavailable"]:
    """A valid plan goes to approval; a planner that gave up ends the run; one without a model pauses."""
    if state.get("status") == "model_unavailable":
        return "model_unavailable"
    return "finalize" if state.get("status") == "failed" else "approve"


def route_after_approve(state: PlanModeState) -> Literal["dispatch", "plan", "approve", "finalize"]:
    """Approved (or edited): execute. Rejected: plan again. Cancelled: finish. Otherwise ask again."""
    status = state.get("status")
    if status == "cancelled":
        return "finalize"
    if status == "planning":
        return "plan"
    if state.get("approval_error") or state.get("needs_approval") or status == "awaiting_approval":
        return "approve"
    return "dispatch"


def route_after_patch(state: PlanModeState) -> Literal["dispatch", "approve", "finalize", "model_unavailable"]:
    """A patch that needs approval goes to approve; a failed repair ends the run; otherwise execute."""
    if state.get("status") == "model_unavailable":
        return "model_unavailable"
    if state.get("status") == "failed":
        return "finalize"
    return "approve" if state.get("needs_approval") else "dispatch"


def route_after_respond(state: PlanModeState) -> Literal["model_unavailable", "__end__"]:
    """The direct answer ends the run (``"__end__"`` is LangGraph's END), unless the model could not be
    reached (the run pauses)."""
    return "model_unavailable" if state.get("status") == "model_unavailable" else "__end__"
