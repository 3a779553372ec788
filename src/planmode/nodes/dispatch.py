"""dispatch: route by step status — ready steps to execute_step (one ``Send`` each, bounded by
``max_parallel``), trouble to reflect, a finished plan to finalize."""

from __future__ import annotations

from typing import Any, NotRequired

from langgraph.runtime import Runtime
from langgraph.types import Send
from typing_extensions import TypedDict

from planmode.nodes._deps import Deps, settings_of
from planmode.state.graph_state import PlanModeState
from planmode.state.models import Plan, Step, StepStatus, StepTransition
from planmode.state.reducer import PlanUpdate

__all__ = ["StepTask", "dispatch_sends", "find_trouble", "make_dispatch", "next_batch"]

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
    durable: NotRequired[bool]
    """True when some step is done: the task waits until the checkpoint it runs from is saved before it starts."""


def find_trouble(plan: Plan) -> str | None:
    """Why execution cannot simply go on: a failed step, a blocked step, or a deadlock (None when fine)."""
    failed = plan.by_status(S.FAILED)
    if failed:
        return "; ".join(
            f"step {s.id!r} failed after {s.attempts} attempt(s): {s.error or 'no reason'}" for s in failed
        )
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


def next_batch(state: PlanModeState, plan: Plan | None, max_parallel: int) -> dict[str, Any]:
    """What dispatch decides for ``plan`` in ``state``: the state update that marks the next batch running (at
    most ``max_parallel`` steps), or records the trouble, the finished run, the pause or the re-approval.

    Pure: dispatch calls it on the state it is given, and verify on the state it leaves (its own transitions
    applied), so that a layer of steps takes two checkpointed super-steps (execute_step, verify), not three.
    """
    lost = state.get("unavailable")
    if lost:  # execute_step or verify could not reach the model: pause (planmode.nodes.model_unavailable)
        return {"status": "model_unavailable", "error": lost.get("error")}
    if plan is None or plan.version == 0:
        return {"status": "failed", "error": "there is no valid plan"}
    if state.get("needs_approval"):
        return {}
    approved = state.get("approved_revision")
    if approved is not None and plan.revision != approved:  # the plan executed is exactly the plan approved
        return {
            "needs_approval": True,
            "approved_revision": None,
            "approval_error": "the plan changed after it was approved; review it again",
        }
    if plan.is_complete:
        return {"status": "completed", "approved_revision": None}
    trouble = find_trouble(plan)
    if trouble:
        return {"trouble": trouble, "approved_revision": None}
    # A step left running without an outcome (after a crash, a rollback or an edit) is dispatched again,
    # first, as the same attempt (it never finished: a crash, a rollback, an edit or a lost model).
    outcomes = state.get("step_outcomes") or {}
    stale = [s for s in plan.by_status(S.RUNNING) if s.id not in outcomes]
    batch = (stale + plan.ready_steps())[: max(1, max_parallel)]
    transitions = [StepTransition(id=s.id, status=S.RUNNING, attempts=_attempt(s)) for s in batch]
    return {
        "plan": PlanUpdate(transitions=transitions, source="dispatch"),
        "approved_revision": None,
        "status": "running",
    }


def make_dispatch(deps: Deps) -> Any:
    """Build the dispatch node.

    It returns only what it changes (`next_batch`: steps marked running, the trouble, the status); the router
    `planmode.graph.routing.route_after_dispatch` reads the route from that state: a ``Send`` per running
    step without an outcome, reflect, finalize or approve. So an edit through ``update_state`` between two
    nodes re-runs that router on the edited state instead of stranding the run. dispatch runs where
    execution starts (after approve, patch, reflect, a pause); within a run verify decides the next batch
    itself. No step starts before the checkpoint it runs from is durable: execute_step waits for it.
    """
    del deps  # dispatch needs no model, tools or store

    def dispatch(state: PlanModeState, runtime: Runtime[Any]) -> dict[str, Any]:
        return next_batch(state, state.get("plan"), settings_of(state, runtime).max_parallel)

    return dispatch


def dispatch_sends(state: PlanModeState, limit: int | None = None) -> list[Send]:
    """One execute_step ``Send`` per running step that has no outcome yet (at most ``limit``)."""
    plan = state.get("plan")
    if not isinstance(plan, Plan):
        return []
    outcomes = state.get("step_outcomes") or {}
    running = [s for s in plan.by_status(S.RUNNING) if s.id not in outcomes]
    if limit is not None:
        running = running[: max(1, limit)]
    settings = state.get("settings") or {}
    # Every step done so far is durable before the next ones start (LangGraph's default "async" durability
    # saves checkpoints behind execution): each task waits for the checkpoint it runs from when one is done.
    durable = any(s.status is S.DONE for s in plan.steps)
    # Each task carries only its step and its dependencies' summaries, not the whole plan.
    return [Send("execute_step", _task(plan, s, settings, durable)) for s in running]


def _attempt(step: Step) -> int:
    """The attempt a dispatch starts: the next one, or the same one for a step still running without an
    outcome (its executor lost the model, or a rollback went back to it): that attempt never finished."""
    return step.attempts if step.status is S.RUNNING else step.attempts + 1


def _task(plan: Plan, step: Step, settings: dict[str, Any], durable: bool) -> StepTask:
    deps: dict[str, dict[str, str | None]] = {}
    for d in step.dependencies:
        dep = plan.get(d)
        if dep is not None:
            deps[d] = {"result": dep.result, "output_ref": dep.output_ref}
    return StepTask(
        step=step, goal=plan.goal, plan_version=plan.version, dependencies=deps, settings=settings, durable=durable
    )
