"""execute_step: run one step (a ``Send`` task) with its dependencies' results; never raises for a failing
tool or executor — that is a failed attempt recorded in the outcome."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel
from langgraph._internal._runnable import RunnableCallable  # a node with a sync and an async function
from langgraph.store.base import BaseStore

from planmode.alease import aassert_lease_held
from planmode.context import PlanModeContext, resolve_settings
from planmode.events import emit
from planmode.executors import StepContext, adefault_executor, arun_executor, default_executor, run_executor
from planmode.lease import assert_lease_held
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate, store_of
from planmode.nodes._outputs import OUTPUT_NAMESPACE, adependency_output, aput_output, dependency_output, put_output
from planmode.nodes._task import StepTask
from planmode.persistence import await_until_durable, wait_until_durable
from planmode.state.graph_state import StepOutcome
from planmode.state.models import Step

__all__ = ["OUTPUT_NAMESPACE", "make_execute_step"]


def make_execute_step(deps: Deps) -> RunnableCallable:
    """Build the execute_step node: a sync function for ``invoke`` and an async one for ``ainvoke`` (the executor
    awaited, the model called with ``ainvoke``, the store read and written with ``aget``/``aput``). Add it with
    ``input_schema=StepTask``: a node given as a runnable has no type hints to infer it from."""

    def start(task: StepTask, runtime: NodeRuntime) -> tuple[Step, PlanModeContext, BaseStore | None]:
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
            dependencies=dependencies,
            attempt=task["step"].attempts,
            previous_error=task["step"].error,
            settings=settings,
            tools=deps.tools,
            model=model,
        )

    def execute_step(state: StepTask, runtime: NodeRuntime) -> StateUpdate:
        assert_lease_held()  # a holder that lost the thread's lease starts no step (planmode.lease)
        task = state  # the Send payload: one step and what it needs
        if task.get("durable"):  # the steps done so far are saved before this one starts (persistence.py)
            wait_until_durable()
        step, settings, store = start(task, runtime)
        inputs = {d: dependency_output(info, store) for d, info in task["dependencies"].items()}
        model = deps.models.get(settings) if deps.executor is None else None  # only the default executor needs it
        outcome = run_executor(deps.executor or default_executor, step, context(task, settings, inputs, model))
        if store is not None and outcome.ok and outcome.output:
            outcome = _kept(outcome, put_output(store, step.id, step.attempts, outcome.output), settings)
        return {"step_outcomes": {step.id: outcome}}

    async def aexecute_step(state: StepTask, runtime: NodeRuntime) -> StateUpdate:
        await aassert_lease_held()  # as execute_step
        task = state
        if task.get("durable"):  # the same wait, polling with asyncio.sleep and the saver's aget_tuple
            await await_until_durable()
        step, settings, store = start(task, runtime)
        inputs = {d: await adependency_output(info, store) for d, info in task["dependencies"].items()}
        model = await deps.models.aget(settings) if deps.executor is None else None
        outcome = await arun_executor(deps.executor or adefault_executor, step, context(task, settings, inputs, model))
        if store is not None and outcome.ok and outcome.output:
            outcome = _kept(outcome, await aput_output(store, step.id, step.attempts, outcome.output), settings)
        return {"step_outcomes": {step.id: outcome}}

    return RunnableCallable(execute_step, aexecute_step, name="execute_step", trace=False)


def _kept(outcome: StepOutcome, key: str, settings: PlanModeContext) -> StepOutcome:
    """The outcome of an attempt whose full output the store keeps under ``key``: the outcome (a pending write,
    then a checkpoint until verify clears it) keeps only its beginning; verify reads the rest with
    `stored_output`."""
    return outcome.model_copy(update={"output_ref": key, "output": outcome.output[: settings.result_chars]})
