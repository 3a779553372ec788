"""dispatch: route by step status — ready steps to execute_step (one ``Send`` each, bounded by
``max_parallel``), trouble to reflect, a finished plan to finalize."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Command, Send
from typing_extensions import TypedDict

from planmode.nodes._deps import Deps, settings_of
from planmode.state.graph_state import PlanModeState
from planmode.state.models import Plan, Step, StepStatus, StepTransition
from planmode.state.reducer import PlanUpdate

__all__ = ["StepTask", "find_trouble", "make_dispatch"]

S = StepStatus


class StepTask(TypedDict):
    """The input of one execute_step task (sent with ``Send``)."""

    step: Step
    """The step as it runs (status running, attempts counted)."""
    goal: str
    plan_version: int
    dependencies: dict[str, dict[str, str | None]]
    """Each dependency's ``result`` summary and ``output_ref`` (store key of the full output)."""
    settings: dict[str, Any]


def find_trouble(plan: Plan) -> str | None:
    """Why execution cannot simply go on: a failed step, a blocked step, or a deadlock (None when fine)."""
    failed = plan.by_status(S.FAILED)
    if failed:
        return "; ".join(f"step {s.id!r} failed after {s.attempts} attempt(s): {s.error or 'no reason'}"
                         for s in failed)
    blocked = plan.by_status(S.BLOCKED)
    if blocked:
        return "; ".join(f"step {s.id!r} is blocked: {s.error or 'no reason'}" for s in blocked)
    pending = plan.by_status(S.PENDING)
    if pending and not plan.ready_steps() and not plan.by_status(S.RUNNING):
        waits = []
        done = {s.id for s in plan.by_status(S.DONE)}
        for s in pending:
            missing = [d for d in s.dependencies if d not in done]
            waits.append(f"{s.id} waits for {', '.join(missing)}")
        return "deadlock: no step can run (" + "; ".join(waits) + ")"
    return None


def make_dispatch(deps: Deps) -> Any:
    """Build the dispatch node."""

    def dispatch(
        state: PlanModeState, runtime: Runtime[Any]
    ) -> Command[Literal["execute_step", "reflect", "finalize", "approve", "model_unavailable"]]:
        settings = settings_of(state, runtime)
        plan = state.get("plan")
        lost = state.get("unavailable")
        if lost:  # execute_step or verify could not reach the model: pause (planmode.nodes.model_unavailable)
            return Command(goto="model_unavailable", update={"status": "model_unavailable", "error": lost.get("error")})
        if plan is None or plan.version == 0:
            return Command(goto="finalize", update={"status": "failed", "error": "there is no valid plan"})
        if state.get("needs_approval"):
            return Command(goto="approve")
        approved = state.get("approved_revision")
        if approved is not None and plan.revision != approved:  # the plan executed is exactly the plan approved
            return Command(goto="approve", update={
                    "needs_approval": True, "approved_revision": None,
                    "approval_error": "the plan changed after it was approved; review it again"})
        if plan.is_complete:
            return Command(goto="finalize", update={"status": "completed", "approved_revision": None})
        trouble = find_trouble(plan)
        if trouble:
            return Command(goto="reflect", update={"trouble": trouble, "approved_revision": None})
        # A step left running without an outcome (e.g. after a rollback) is dispatched again.
        ready = plan.ready_steps() + [s for s in plan.by_status(S.RUNNING) if s.id not in
                                      (state.get("step_outcomes") or {})]
        batch = ready[: max(1, settings.max_parallel)]
        transitions = [StepTransition(id=s.id, status=S.RUNNING, attempts=_attempt(s)) for s in batch]
        update = {"plan": PlanUpdate(transitions=transitions, source="dispatch"), "approved_revision": None,
                  "status": "running"}
        # Each task carries only its step and its dependencies' summaries, not the whole plan.
        sends = [Send("execute_step", _task(plan, s, state.get("settings") or {})) for s in batch]
        return Command(goto=sends, update=update)

    return dispatch


def _attempt(step: Step) -> int:
    """The attempt a dispatch starts: the next one, or the same one for a step still running without an
    outcome (its executor lost the model, or a rollback went back to it): that attempt never finished."""
    return step.attempts if step.status is S.RUNNING else step.attempts + 1


def _task(plan: Plan, step: Step, settings: dict[str, Any]) -> StepTask:
    deps: dict[str, dict[str, str | None]] = {}
    for d in step.dependencies:
        dep = plan.get(d)
        if dep is not None:
            deps[d] = {"result": dep.result, "output_ref": dep.output_ref}
    running = step.model_copy(update={"status": S.RUNNING, "attempts": _attempt(step)})
    return StepTask(step=running, goal=plan.goal, plan_version=plan.version, dependencies=deps, settings=settings)
