"""dispatch: route by step status — ready steps to execute_step (one ``Send`` each, bounded by
``max_parallel``), trouble to reflect, a finished plan to finalize."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from langgraph.types import Send

from planmode._compat import RunnableCallable
from planmode.approval.policy import from_settings, policy_name, read_only_tools_of
from planmode.approval.staleness import fingerprint
from planmode.nodes._batch import find_trouble, next_batch
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate, settings_of
from planmode.nodes._gates import dispatch_gates
from planmode.nodes._task import StepTask
from planmode.nodes._twin import Body, call, twin_node
from planmode.state.graph_state import PlanModeState
from planmode.state.models import Plan, Step, StepStatus

__all__ = ["StepTask", "dispatch_sends", "find_trouble", "make_dispatch", "next_batch"]

S = StepStatus


def make_dispatch(deps: Deps, policy: Any = None) -> RunnableCallable:
    """Build the dispatch node: its gates (`planmode.nodes._gates.dispatch_gates`: the staleness check, the policy
    on steps that need their own approval), then one pure decision (`next_batch`), on both paths (``invoke``, and
    ``ainvoke`` with the fingerprint taken in a worker thread).

    It returns only what it changes (`next_batch`: steps marked running, the trouble, the status); the router
    `planmode.graph.routing.route_after_dispatch` reads the route from that state: a ``Send`` per running
    step without an outcome, reflect, finalize or approve. So an edit through ``update_state`` between two
    nodes re-runs that router on the edited state instead of stranding the run. dispatch runs where
    execution starts (after a human's approval, after patch, reflect, a pause, or when a gate may stop the
    batch); an approval the policy gave starts the first batch in approve's super-step, and within a run verify
    decides the next batch itself. Neither is the guarantee: execute_step checks each step it is sent against
    the approval record. No step starts before the checkpoint it runs from is durable: execute_step waits for it.
    """
    chosen = policy if policy is not None else from_settings
    name = policy_name(chosen)
    read_only = read_only_tools_of(deps.tools)

    def dispatch(state: PlanModeState, runtime: NodeRuntime) -> Body[StateUpdate]:
        settings = settings_of(state, runtime)
        gates = dispatch_gates(state, settings, chosen, name, read_only, deps.tools)
        try:
            request = next(gates)
            while True:
                fp = yield from _fingerprint(request[1], request[2])
                request = gates.send(fp)
        except StopIteration as done:
            extra, stop = done.value
        if stop:
            return cast(StateUpdate, extra)
        decided = next_batch(state, state.get("plan"), settings.max_parallel)
        return {**extra, **decided} if extra else decided

    return twin_node("dispatch", dispatch)


def _fingerprint(workspace: str | None, paths: list[str]) -> Body[Any]:
    """The workspace fingerprint (`planmode.approval.staleness.fingerprint`), in a worker thread on the async path."""
    return call(lambda: fingerprint(workspace, paths), lambda: asyncio.to_thread(fingerprint, workspace, paths))


def dispatch_sends(state: PlanModeState, limit: int | None = None) -> list[Send]:
    """One execute_step ``Send`` per running step that has no outcome yet (at most ``limit``)."""
    plan = state.get("plan")
    if not isinstance(plan, Plan):
        return []
    outcomes = state.get("step_outcomes") or {}
    running = [s for s in plan.by_status(S.RUNNING) if s.id not in outcomes]
    if limit is not None:
        running = running[: max(1, limit)]
    # Every step done so far is durable before the next ones start (LangGraph's default "async" durability
    # saves checkpoints behind execution): each task waits for the checkpoint it runs from when one is done.
    durable = any(s.status is S.DONE for s in plan.steps)
    # Each task carries only its step and its dependencies' summaries, not the whole plan. Not the settings, the
    # usage or the budget either: execute_step reads those from the graph's channels (`trusted`), never from a
    # Send, which anyone can send; a copy in every Send was saved in the writes and the checkpoint for nothing.
    sends = [Send("execute_step", _task(plan, s, durable)) for s in running]
    return sends


def _task(plan: Plan, step: Step, durable: bool) -> StepTask:
    deps: dict[str, dict[str, str | None]] = {}
    for d in step.dependencies:
        dep = plan.get(d)
        if dep is not None:
            deps[d] = {"result": dep.result, "output_ref": dep.output_ref}
    return StepTask(step=step, goal=plan.goal, plan_version=plan.version, dependencies=deps, durable=durable)
