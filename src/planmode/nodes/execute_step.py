"""execute_step: run one step (a ``Send`` task) with its dependencies' results; never raises for a failing
tool or executor — that is a failed attempt recorded in the outcome."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph._internal._runnable import RunnableCallable  # a node with a sync and an async function
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from planmode.context import PlanModeContext, resolve_settings
from planmode.events import emit
from planmode.executors import StepContext, adefault_executor, arun_executor, default_executor, run_executor
from planmode.nodes._deps import Deps, store_of
from planmode.nodes.dispatch import StepTask
from planmode.state.graph_state import StepOutcome
from planmode.state.models import Step

__all__ = ["OUTPUT_NAMESPACE", "make_execute_step", "stored_output"]

#: Store namespace of full step outputs: (*OUTPUT_NAMESPACE, thread_id).
OUTPUT_NAMESPACE = ("planmode", "outputs")


def make_execute_step(deps: Deps) -> RunnableCallable:
    """Build the execute_step node: a sync function for ``invoke`` and an async one for ``ainvoke`` (the executor
    awaited, the model called with ``ainvoke``, the store read and written with ``aget``/``aput``). Add it with
    ``input_schema=StepTask``: a node given as a runnable has no type hints to infer it from."""

    def start(task: StepTask, runtime: Runtime[Any]) -> tuple[Step, PlanModeContext, BaseStore | None]:
        settings = resolve_settings(runtime.context, task.get("settings"))
        step = task["step"]
        emit(
            "step_started", step.description, step_id=step.id, plan_version=task["plan_version"], attempt=step.attempts
        )
        return step, settings, store_of(deps, runtime)

    def context(
        task: StepTask, settings: PlanModeContext, dependencies: dict[str, str], model: BaseChatModel | None
    ) -> StepContext:
        return StepContext(
            goal=task["goal"],
            plan_text="",
            dependencies=dependencies,
            attempt=task["step"].attempts,
            previous_error=task["step"].error,
            settings=settings,
            tools=deps.tools,
            model=model,
        )

    def execute_step(task: StepTask, runtime: Runtime[Any]) -> dict[str, Any]:
        step, settings, store = start(task, runtime)
        inputs = {d: _dependency_output(info, store) for d, info in task["dependencies"].items()}
        model = deps.models.get(settings) if deps.executor is None else None  # only the default executor needs it
        outcome = run_executor(deps.executor or default_executor, step, context(task, settings, inputs, model))
        kept = _kept(step, outcome, store)
        if kept is not None and store is not None:
            store.put(*kept)
        return _update(step, outcome, kept, settings)

    async def aexecute_step(task: StepTask, runtime: Runtime[Any]) -> dict[str, Any]:
        step, settings, store = start(task, runtime)
        inputs = {d: await _adependency_output(info, store) for d, info in task["dependencies"].items()}
        model = await deps.models.aget(settings) if deps.executor is None else None
        outcome = await arun_executor(deps.executor or adefault_executor, step, context(task, settings, inputs, model))
        kept = _kept(step, outcome, store)
        if kept is not None and store is not None:
            await store.aput(*kept)
        return _update(step, outcome, kept, settings)

    return RunnableCallable(execute_step, aexecute_step, name="execute_step", trace=False)


def _kept(step: Step, outcome: StepOutcome, store: Any) -> tuple[tuple[str, ...], str, dict[str, Any]] | None:
    """Where and what to keep of a successful attempt's output in the store (None when there is no store)."""
    if store is None or not outcome.ok or not outcome.output:
        return None
    return (
        (*OUTPUT_NAMESPACE, _thread_id()),
        f"{step.id}.{step.attempts}",
        {"step_id": step.id, "output": outcome.output},
    )


def _update(
    step: Step,
    outcome: StepOutcome,
    kept: tuple[tuple[str, ...], str, dict[str, Any]] | None,
    settings: PlanModeContext,
) -> dict[str, Any]:
    if kept is not None:
        # The store holds the full output; the outcome (a pending write, then a checkpoint until verify clears it)
        # keeps only its beginning. verify reads the full output back with `stored_output`.
        outcome = outcome.model_copy(update={"output_ref": kept[1], "output": outcome.output[: settings.result_chars]})
    return {"step_outcomes": {step.id: outcome}}


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


async def _adependency_output(info: dict[str, str | None], store: Any) -> str:
    """`_dependency_output` with the store's ``aget``."""
    ref = info.get("output_ref")
    if store is not None and ref:
        item = await store.aget((*OUTPUT_NAMESPACE, _thread_id()), ref)
        if item is not None:
            return str(item.value.get("output", info.get("result") or ""))
    return info.get("result") or ""
