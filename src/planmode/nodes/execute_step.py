"""execute_step: run one step (a ``Send`` task) with its dependencies' results; never raises for a failing
tool or executor — that is a failed attempt recorded in the outcome."""

from __future__ import annotations

from planmode.context import resolve_settings
from planmode.events import emit
from planmode.executors import StepContext, default_executor, run_executor
from planmode.nodes._deps import Deps, Node, NodeRuntime, StateUpdate, store_of
from planmode.nodes._outputs import OUTPUT_NAMESPACE, dependency_output, put_output
from planmode.nodes._task import StepTask

__all__ = ["OUTPUT_NAMESPACE", "make_execute_step"]


def make_execute_step(deps: Deps) -> Node[StepTask, StateUpdate]:
    """Build the execute_step node."""

    def execute_step(state: StepTask, runtime: NodeRuntime) -> StateUpdate:
        task = state  # the Send payload: one step and what it needs
        settings = resolve_settings(runtime.context, task.get("settings"))
        step = task["step"]
        emit(
            "step_started", step.description, step_id=step.id, plan_version=task["plan_version"], attempt=step.attempts
        )
        store = store_of(deps, runtime)
        context = StepContext(
            goal=task["goal"],
            dependencies={d: dependency_output(info, store) for d, info in task["dependencies"].items()},
            attempt=step.attempts,
            previous_error=step.error,
            settings=settings,
            tools=deps.tools,
            model=deps.models.get(settings) if deps.executor is None else None,  # only the default executor needs it
        )
        outcome = run_executor(deps.executor or default_executor, step, context)
        if store is not None and outcome.ok and outcome.output:
            key = put_output(store, step.id, step.attempts, outcome.output)
            # The store holds the full output; the outcome (a pending write, then a checkpoint until verify
            # clears it) keeps only its beginning. verify reads the full output back with `stored_output`.
            outcome = outcome.model_copy(update={"output_ref": key, "output": outcome.output[: settings.result_chars]})
        return {"step_outcomes": {step.id: outcome}}

    return execute_step
