"""dispatch: route by step status — ready steps to execute_step (one ``Send`` each, bounded by
``max_parallel``), trouble to reflect, a finished plan to finalize."""

from __future__ import annotations

from typing import Any

from langgraph._internal._runnable import RunnableCallable  # a node with a sync and an async function
from langgraph.types import Send

from planmode.context import PlanModeContext
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate, settings_of
from planmode.nodes._task import StepTask
from planmode.persistence import await_until_durable, wait_until_durable
from planmode.state.graph_state import PlanModeState
from planmode.state.models import Plan, PlanSource, Step, StepStatus, StepTransition
from planmode.state.reducer import PlanUpdate

__all__ = ["StepTask", "decide", "dispatch_sends", "find_trouble", "make_dispatch"]

S = StepStatus


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


def make_dispatch(deps: Deps) -> RunnableCallable:
    """Build the dispatch node: a sync function for ``invoke`` and an async one for ``ainvoke``, which differ only
    in how they wait for the durability of the done steps (`wait_until_durable` / `await_until_durable`).

    It returns only what it changes (steps marked running, the trouble, the status); the router
    `planmode.graph.routing.route_after_dispatch` reads the route from that state: a ``Send`` per running
    step without an outcome, reflect, finalize or approve. So an edit through ``update_state`` between two
    nodes re-runs that router on the edited state instead of stranding the run.
    """
    del deps  # dispatch needs no model, tools or store

    def dispatch(state: PlanModeState, runtime: NodeRuntime) -> StateUpdate:
        update, durable_first = decide(state, settings_of(state, runtime))
        if durable_first:
            wait_until_durable()
        return update

    async def adispatch(state: PlanModeState, runtime: NodeRuntime) -> StateUpdate:
        update, durable_first = decide(state, settings_of(state, runtime))
        if durable_first:
            await await_until_durable()  # asyncio.sleep between asks: other runs go on meanwhile
        return update

    return RunnableCallable(dispatch, adispatch, name="dispatch", trace=False)


def decide(state: PlanModeState, settings: PlanModeContext) -> tuple[StateUpdate, bool]:
    """dispatch's update, and whether the checkpoint its task runs from must be durable before it is returned
    (steps are started and some step is done already)."""
    plan = state.get("plan")
    lost = state.get("unavailable")
    if lost:  # execute_step or verify could not reach the model: pause (planmode.nodes.model_unavailable)
        return {"status": "model_unavailable", "error": lost.get("error")}, False
    if plan is None or plan.version == 0:
        return {"status": "failed", "error": "there is no valid plan"}, False
    if state.get("needs_approval"):
        return {}, False
    approved = state.get("approved_revision")
    if approved is not None and plan.revision != approved:  # the plan executed is exactly the plan approved
        return {
            "needs_approval": True,
            "approved_revision": None,
            "approval_error": "the plan changed after it was approved; review it again",
        }, False
    if plan.is_complete:
        return {"status": "completed", "approved_revision": None}, False
    trouble = find_trouble(plan)
    if trouble:
        return {"trouble": trouble, "approved_revision": None}, False
    # A step left running without an outcome (after a crash, a rollback or an edit) is dispatched again,
    # first, as the same attempt (it never finished: a crash, a rollback, an edit or a lost model).
    outcomes = state.get("step_outcomes") or {}
    stale = [s for s in plan.by_status(S.RUNNING) if s.id not in outcomes]
    batch = (stale + plan.ready_steps())[: max(1, settings.max_parallel)]
    transitions = [StepTransition(id=s.id, status=S.RUNNING, attempts=_attempt(s)) for s in batch]
    update: StateUpdate = {
        "plan": PlanUpdate(transitions=transitions, source=PlanSource.DISPATCH),
        "approved_revision": None,
        "status": "running",
    }
    # Every step done so far must be durable before the next ones start (LangGraph's default "async"
    # durability writes checkpoints behind execution): the node waits for the checkpoint its task runs from.
    return update, bool(plan.by_status(S.DONE))


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
    # Each task carries only its step and its dependencies' summaries, not the whole plan.
    return [Send("execute_step", _task(plan, s, settings)) for s in running]


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
    return StepTask(step=step, goal=plan.goal, plan_version=plan.version, dependencies=deps, settings=settings)
