"""execute_step: run one step (a ``Send`` task) with its dependencies' results; never raises for a failing
tool or executor — that is a failed attempt recorded in the outcome."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from planmode.context import resolve_settings
from planmode.events import emit
from planmode.executors import StepContext, default_executor, run_executor
from planmode.nodes._deps import Deps, store_of
from planmode.nodes._outputs import OUTPUT_NAMESPACE, _dependency_output, _thread_id
from planmode.nodes._task import StepTask

__all__ = ["OUTPUT_NAMESPACE", "make_execute_step"]


def make_execute_step(deps: Deps) -> Any:
    """Build the execute_step node."""

    def execute_step(task: StepTask, runtime: Runtime[Any]) -> dict[str, Any]:
        settings = resolve_settings(runtime.context, task.get("settings"))
        step = task["step"]
        emit(
            "step_started", step.description, step_id=step.id, plan_version=task["plan_version"], attempt=step.attempts
        )
        store = store_of(deps, runtime)
        context = StepContext(
            goal=task["goal"],
            plan_text="",
            dependencies={d: _dependency_output(info, store) for d, info in task["dependencies"].items()},
            attempt=step.attempts,
            previous_error=step.error,
            settings=settings,
            tools=deps.tools,
            model=deps.models.get(settings) if deps.executor is None else None,  # only the default executor needs it
        )
        outcome = run_executor(deps.executor or default_executor, step, context)
        if store is not None and outcome.ok and outcome.output:
            key = f"{step.id}.{step.attempts}"
            store.put((*OUTPUT_NAMESPACE, _thread_id()), key, {"step_id": step.id, "output": outcome.output})
            # The store holds the full output; the outcome (a pending write, then a checkpoint until verify
            # clears it) keeps only its beginning. verify reads the full output back with `stored_output`.
            outcome = outcome.model_copy(update={"output_ref": key, "output": outcome.output[: settings.result_chars]})
        return {"step_outcomes": {step.id: outcome}}

    return execute_step
