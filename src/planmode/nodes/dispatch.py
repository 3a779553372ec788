"""dispatch: route by step status — ready steps to execute_step (one ``Send`` each, bounded by
``max_parallel``), trouble to reflect, a finished plan to finalize."""

from __future__ import annotations

from typing import Any

from langgraph._internal._runnable import RunnableCallable  # a node with a sync and an async function
from langgraph.types import Send

from planmode.nodes._batch import find_trouble, next_batch
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate, settings_of
from planmode.nodes._task import StepTask
from planmode.state.graph_state import PlanModeState
from planmode.state.models import Plan, Step, StepStatus

__all__ = ["StepTask", "dispatch_sends", "find_trouble", "make_dispatch", "next_batch"]

S = StepStatus


def make_dispatch(deps: Deps) -> RunnableCallable:
    """Build the dispatch node: one pure decision (`next_batch`) on both paths, ``invoke`` and ``ainvoke`` (it
    awaits nothing: it runs on the event loop instead of taking a worker thread).

    It returns only what it changes (`next_batch`: steps marked running, the trouble, the status); the router
    `planmode.graph.routing.route_after_dispatch` reads the route from that state: a ``Send`` per running
    step without an outcome, reflect, finalize or approve. So an edit through ``update_state`` between two
    nodes re-runs that router on the edited state instead of stranding the run. dispatch runs where
    execution starts (after a human's approval, which it checks is of this very plan revision; after patch,
    reflect, a pause, or when a gate may stop the batch); an approval the policy gave starts the first batch
    in approve's super-step (`planmode.nodes.gates`), and within a run verify decides the next batch itself.
    No step starts before the checkpoint it runs from is durable: execute_step waits for it.
    """
    del deps  # dispatch needs no model, tools or store

    def dispatch(state: PlanModeState, runtime: NodeRuntime) -> StateUpdate:
        return next_batch(state, state.get("plan"), settings_of(state, runtime).max_parallel)

    async def adispatch(state: PlanModeState, runtime: NodeRuntime) -> StateUpdate:
        return dispatch(state, runtime)

    return RunnableCallable(dispatch, adispatch, name="dispatch", trace=False)


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
    sends = [Send("execute_step", _task(plan, s, settings, durable)) for s in running]
    usage, budget = state.get("usage"), state.get("budget")
    spent = {k: usage[k] for k in ("total", "models") if k in usage} if isinstance(usage, dict) else None
    for send in sends:  # each model call of a step is checked against the budget from there (planmode.budget)
        send.arg.update(usage=spent, budget=budget)
    return sends


def _task(plan: Plan, step: Step, settings: dict[str, Any], durable: bool) -> StepTask:
    deps: dict[str, dict[str, str | None]] = {}
    for d in step.dependencies:
        dep = plan.get(d)
        if dep is not None:
            deps[d] = {"result": dep.result, "output_ref": dep.output_ref}
    return StepTask(
        step=step, goal=plan.goal, plan_version=plan.version, dependencies=deps, settings=settings, durable=durable
    )
