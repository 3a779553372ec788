"""execute_step: run one step (a ``Send`` task) with its dependencies' results; never raises for a failing
tool or executor — that is a failed attempt recorded in the outcome."""

from __future__ import annotations

from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime

from planmode.context import resolve_settings
from planmode.events import emit
from planmode.executors import StepContext, default_executor, run_executor
from planmode.nodes._deps import Deps, store_of
from planmode.nodes.dispatch import StepTask
from planmode.persistence import wait_until_durable
from planmode.state.graph_state import StepOutcome

__all__ = ["OUTPUT_NAMESPACE", "make_execute_step", "stored_output"]

#: Store namespace of full step outputs: (*OUTPUT_NAMESPACE, thread_id).
OUTPUT_NAMESPACE = ("planmode", "outputs")


def make_execute_step(deps: Deps) -> Any:
    """Build the execute_step node."""

    def execute_step(task: StepTask, runtime: Runtime[Any]) -> dict[str, Any]:
        settings = resolve_settings(runtime.context, task.get("settings"))
        step = task["step"]
        if task.get("durable"):  # the steps done so far are saved before this one starts (persistence.py)
            wait_until_durable()
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


def _thread_id() -> str:
    try:
        return str(get_config().get("configurable", {}).get("thread_id") or "default")
    except RuntimeError:
        return "default"


def stored_output(outcome: StepOutcome, store: Any) -> str:
    """An attempt's full output: from the store when it was kept there, else the outcome's own text.

    Call it in the node's own thread (the store namespace needs the run's config)."""
    if store is not None and outcome.output_ref:
        item = store.get((*OUTPUT_NAMESPACE, _thread_id()), outcome.output_ref)
        if item is not None:
            return str(item.value.get("output", outcome.output))
    return outcome.output


def _dependency_output(info: dict[str, str | None], store: Any) -> str:
    """A dependency's full output from the store when it was kept there, else its summary."""
    ref = info.get("output_ref")
    if store is not None and ref:
        item = store.get((*OUTPUT_NAMESPACE, _thread_id()), ref)
        if item is not None:
            return str(item.value.get("output", info.get("result") or ""))
    return info.get("result") or ""
