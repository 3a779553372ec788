"""execute_step: run one step — only the step that was approved, exactly as it was approved.

This node is **the execution guard**: the last check before a step's executor runs, on every path (``invoke``,
``ainvoke``, the LangGraph server, planmode as a tool or behind the middleware, a ``Send`` from anywhere). It
trusts nothing it is sent: the ``Send`` names a step, and the node reads the step, its plan, the approval record
and the settings from the graph's own channels (what the super-step started from). The step runs only when:

1. it is a step of the plan, marked ``running`` (a done step never runs again);
2. every dependency is ``done``;
3. a sealed grant in the run's approval record (`planmode.state.approvals`) covers its exact definition (goal,
   id, description, dependencies, tools, complexity, acceptance) — written only by the approve node (a human or
   the policy), a per-step answer, or a patch the settings let run without re-approval (and only for a step
   whose write tools a human's or the policy's grant covered), never by ``update_state`` — and that grant is
   bound to this run, to this thread and to this graph namespace, as this node's own config names them
   (``thread_id``, ``checkpoint_ns``): a sealed grant copied from another thread or an earlier run covers
   nothing;
4. a step the grant holds for its own answer (``step_approval="writes"``) has that answer, for this definition;
5. the budget allows the next call (a stopped run, or a limit already spent, runs nothing more).

Otherwise the step does not run: it goes back to ``pending``, the refusal is recorded in the approval record,
and a step nobody approved sends the run back to the approval (which shows what changed). A step that does run
is handed only the tools it declared (plus the read-only ones). A failing tool or executor never raises: it is
a failed attempt recorded in the outcome.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.store.base import BaseStore
from langgraph.types import Command

from planmode._compat import CONFIG_KEY_READ, RunnableCallable
from planmode.adapters import adapter_for
from planmode.approval.policy import read_only_tools_of
from planmode.context import PlanModeContext, settings_of
from planmode.errors import ModelUnavailableError
from planmode.executors import StepContext, arun_executor, default_execution, run_executor
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate, negotiated_of, store_of
from planmode.nodes._evidence import workspace_root
from planmode.nodes._outputs import OUTPUT_NAMESPACE, adependency_output, aput_output, dependency_output, put_output
from planmode.nodes._paused import unavailable_update
from planmode.nodes._task import StepTask
from planmode.nodes._twin import Body, call, model_for, twin_node
from planmode.observability.events import emit
from planmode.persistence import await_until_durable, wait_until_durable
from planmode.persistence.changes import astep_journal, step_journal
from planmode.persistence.lease import aassert_lease_held, assert_lease_held
from planmode.state.approvals import (
    Binding,
    covering_grant,
    current_run,
    foreign_grant,
    held_steps,
    run_binding,
    seal,
)
from planmode.state.checks import done_files
from planmode.state.graph_state import StepOutcome
from planmode.state.models import Plan, PlanSource, Step, StepStatus, StepTransition, clean_text
from planmode.state.reducer import PlanUpdate
from planmode.tools import bind_step_tools
from planmode.tools._writes import git_writes, journaling

__all__ = [
    "GUARDED_KEYS",
    "OUTPUT_NAMESPACE",
    "Cleared",
    "Refused",
    "check_step",
    "make_execute_step",
    "trusted",
]

S = StepStatus

#: The channels the guard (and the step's model) read (as the super-step started), never the ``Send`` payload.
GUARDED_KEYS = [
    "plan",
    "approvals",
    "settings",
    "negotiated_output",
    "budget",
    "usage",
    "step_outcomes",
    "needs_approval",
    "status",
    "earlier",
]


class Refused:
    """Why a step may not run, and whether it needs a (new) approval."""

    def __init__(self, step_id: str, reason: str, *, approve_again: bool, step: Step | None = None) -> None:
        self.step_id = step_id
        self.reason = reason
        self.approve_again = approve_again
        self.step = step

    @property
    def started(self) -> bool:
        """Whether planmode started the step (it is marked running in the plan): its refusal goes on to verify."""
        return self.step is not None and self.step.status is S.RUNNING


class Cleared:
    """A step the guard lets run, with what it runs with (read from the channels)."""

    def __init__(self, step: Step, plan: Plan, settings: PlanModeContext, grant: Mapping[str, Any]) -> None:
        self.step = step
        self.plan = plan
        self.settings = settings
        self.grant = grant


def read_channels() -> dict[str, Any]:
    """The graph's own state as the current super-step started (LangGraph's channel read, which its ToolNode
    uses the same way). Empty outside a graph run: the guard then refuses every step."""
    try:
        conf = get_config().get("configurable") or {}
    except RuntimeError:
        return {}
    read = conf.get(CONFIG_KEY_READ)
    if read is None:
        return {}
    values = read(GUARDED_KEYS, False)
    return dict(values) if isinstance(values, Mapping) else {}


def _earlier_of(channels: Mapping[str, Any]) -> str | None:
    """The run's ``earlier`` summary from its channels (None when it follows no run)."""
    earlier = channels.get("earlier")
    return earlier if isinstance(earlier, str) else None


def check_step(
    step_id: str,
    state: Mapping[str, Any],
    settings: PlanModeContext,
    read_only: frozenset[str],
    binding: Binding | None,
) -> Cleared | Refused:
    """The execution guard's decision for ``step_id`` in ``state`` (the channels) in the graph run ``binding``
    names (its config's thread id and namespace; None: not in a graph run, nothing runs): pure, never raises."""
    plan = state.get("plan")
    if binding is None:
        return Refused(
            step_id, "not in a graph run: there is no thread to check the approval against", approve_again=False
        )
    if not isinstance(plan, Plan) or plan.version == 0:
        return Refused(step_id, "there is no approved plan to run it from", approve_again=False)
    step = plan.get(step_id)
    if step is None:
        return Refused(step_id, f"{step_id!r} is not a step of the plan", approve_again=False)
    if step.status is not S.RUNNING:
        return Refused(
            step_id, f"step {step_id!r} is {step.status.value}, not started by planmode", approve_again=False
        )
    if state.get("needs_approval") or state.get("status") in ("awaiting_approval", "cancelled", "completed", "failed"):
        reason = "the run is not executing (an approval is open or the run ended)"
        return Refused(step_id, reason, approve_again=False, step=step)
    waiting = [d for d in step.dependencies if (dep := plan.get(d)) is None or dep.status is not S.DONE]
    if waiting:
        return Refused(
            step_id, f"step {step_id!r} waits for {', '.join(waiting)} (not done)", approve_again=False, step=step
        )
    log = state.get("approvals")
    grant = covering_grant(log, step, plan.goal, binding=binding, read_only=read_only)
    if grant is None:
        why = "it was added or edited after the approval, or a repair gave it a tool nobody approved"
        if foreign_grant(log, step, plan.goal, binding):
            why = "the only grant of it was written for another thread or graph namespace, and was refused"
        return Refused(
            step_id, f"step {step_id!r} as it stands now was never approved here ({why})", approve_again=True, step=step
        )
    writes = [t for t in step.tools if t not in read_only]
    own = step.id in held_steps(grant) or (settings.step_approval == "writes" and bool(writes))
    if own and covering_grant(log, step, plan.goal, kinds=("step",), binding=binding) is None:
        reason = f"step {step_id!r} waits for its own approval (it uses {', '.join(writes) or 'tools'})"
        return Refused(step_id, reason, approve_again=False, step=step)
    spent = _over_budget(state, settings)
    if spent:
        return Refused(step_id, spent, approve_again=False, step=step)
    return Cleared(step, plan, settings, grant)


def _over_budget(state: Mapping[str, Any], settings: PlanModeContext) -> str | None:
    from planmode.budget import cost_of, limits_of
    from planmode.observability.usage import total_tokens

    stored = state.get("budget")
    if isinstance(stored, Mapping) and stored.get("stopped"):
        return "the run was stopped at its budget"
    limits = limits_of(settings, stored)
    usage = state.get("usage")
    if limits.max_tokens and total_tokens(usage) >= limits.max_tokens:
        return f"the token budget ({limits.max_tokens}) is spent"
    if limits.max_cost:
        try:
            cost = cost_of(usage, settings.prices)
        except Exception:  # unknown prices: the model layer's check decides per call
            cost = None
        if cost is not None and cost >= limits.max_cost:
            return f"the cost budget ({limits.max_cost}) is spent"
    return None


def refusal_update(refused: Refused, state: Mapping[str, Any]) -> StateUpdate:
    """What a refused step writes: back to pending (when planmode had started it), the refusal in the approval
    record, and, for a step nobody approved, the approval asked again."""
    emit("step_refused", refused.reason, step_id=refused.step_id)
    plan = state.get("plan")
    thread, ns = run_binding() or (None, None)
    record = {
        "kind": "refused",
        "decision": "refused",
        "policy": "execution guard",
        "by": "planmode",
        "step": clean_text(refused.step_id)[:200],
        "reason": clean_text(refused.reason)[:500],
        "plan_version": plan.version if isinstance(plan, Plan) else 0,
        "revision": plan.revision if isinstance(plan, Plan) else None,
        "run": current_run(state.get("approvals")),
        "thread": thread,
        "ns": ns,
        "at": round(time.time(), 3),
    }
    out: StateUpdate = {"approvals": [seal(record)]}
    step = refused.step
    if step is not None and step.status is S.RUNNING:
        back = StepTransition(id=step.id, status=S.PENDING, attempts=max(0, step.attempts - 1))
        out["plan"] = PlanUpdate(transitions=[back], source=PlanSource.DISPATCH)
    if refused.approve_again:
        out["needs_approval"] = True
        out["status"] = "awaiting_approval"
        out["approval_error"] = f"not run: {clean_text(refused.reason)}; review the plan again"
    return out


def make_execute_step(deps: Deps) -> RunnableCallable:
    """Build the execute_step node: one body (`planmode.nodes._twin`) run by ``invoke`` and ``ainvoke`` alike (on the
    async path the executor awaited, the model called with ``ainvoke``, the store read and written with
    ``aget``/``aput``, the durability wait on the saver's announcements). Add it with
    ``input_schema=StepTask``: a node given as a runnable has no type hints to infer it from."""
    read_only = read_only_tools_of(deps.tools)

    def guard(task: Any, runtime: NodeRuntime) -> tuple[Cleared | Refused, dict[str, Any]]:
        state = read_channels()
        step_id = _step_id(task)
        settings = settings_of(task, runtime)  # the channels' settings (the pipeline's trusted_task), resolved once
        return check_step(step_id, state, settings, read_only, run_binding()), state

    def start(cleared: Cleared, runtime: NodeRuntime) -> BaseStore | None:
        step = cleared.step
        emit(
            "step_started", step.description, step_id=step.id, plan_version=cleared.plan.version, attempt=step.attempts
        )
        return store_of(deps, runtime)

    def context(cleared: Cleared, dependencies: dict[str, str], model: BaseChatModel | None) -> StepContext:
        step = cleared.step
        binding = bind_step_tools(step.id, step.tools, deps.tools)  # the read-only tools + the declared writes
        return StepContext(
            goal=cleared.plan.goal,
            dependencies=dependencies,
            attempt=step.attempts,
            previous_error=step.error,
            settings=cleared.settings,
            tools=binding.tools,
            model=model,
            binding=binding,
            done_files=done_files(cleared.plan, step) | _adapter_kept(cleared, deps.tools),
            earlier=_earlier_of(read_channels()),
        )

    def dependency_info(cleared: Cleared) -> dict[str, dict[str, str | None]]:
        plan = cleared.plan
        return {
            d: {"result": dep.result, "output_ref": dep.output_ref}
            for d in cleared.step.dependencies
            if (dep := plan.get(d)) is not None
        }

    def execute_step(state: StepTask, runtime: NodeRuntime) -> Body[Command[Literal["verify"]] | StateUpdate]:
        task = state  # the Send payload: only the step's id is read from it
        # a holder that lost the thread's lease starts no step (planmode.persistence.lease)
        yield from call(assert_lease_held, aassert_lease_held)
        if task.get("durable"):  # the steps done so far are saved before this one starts (persistence.checkpointers)
            yield from call(wait_until_durable, await_until_durable)
        decision, channels = guard(task, runtime)
        if isinstance(decision, Refused):
            return _to_verify(refusal_update(decision, channels), decision.started)
        store = start(decision, runtime)
        step, settings = decision.step, decision.settings
        try:
            inputs: dict[str, str] = {}
            for dep, info in dependency_info(decision).items():
                inputs[dep] = yield from call(
                    partial(dependency_output, info, store), partial(adependency_output, info, store)
                )
            model = None
            if deps.executor is None:  # the default executor's model
                model = yield from model_for(deps, settings, negotiated_of(channels))
            at = (current_run(channels.get("approvals")), step.id, step.attempts)
            journal = yield from call(partial(step_journal, *at), partial(astep_journal, *at))
            # each file the step's workspace tools change (planmode.persistence.changes); git's data only if allowed
            with journaling(journal), git_writes(settings.allow_git_writes):
                ctx = context(decision, inputs, model)
                if deps.executor is None:  # the default executor's model calls made by this node's one driver
                    outcome = yield from default_execution(step, ctx)
                else:  # a user's executor: called (sync path) or awaited (async path) as it is
                    executor = deps.executor
                    outcome = yield from call(
                        partial(run_executor, executor, step, ctx), partial(arun_executor, executor, step, ctx)
                    )
            if store is not None and outcome.ok and outcome.output:
                put = (store, step.id, step.attempts, outcome.output)
                ref = yield from call(partial(put_output, *put), partial(aput_output, *put))
                outcome = _output_kept_in_store(outcome, ref, settings)
        except ModelUnavailableError as exc:  # a pause, not a verdict on the step (verify routes to it)
            return _to_verify(unavailable_update("execute_step", task, exc), True)
        return _to_verify({"step_outcomes": {step.id: outcome}}, True)

    return twin_node("execute_step", execute_step)


def trusted(task: Any) -> Any:
    """execute_step's task with what the budget check and the usage count read — ``usage``, ``budget`` and
    ``settings`` — taken from the graph's channels, not from the ``Send`` (which anyone can send), and its ``step``
    as a `Step` (a ``Send`` carries it as data). Its pipeline calls this before the metering, so every model call
    of the step is checked against the run's real spending."""
    if not isinstance(task, Mapping):
        return task
    out = dict(task)
    if isinstance(out.get("step"), Mapping):
        try:
            out["step"] = Step.model_validate(out["step"])
        except ValueError:
            out["step"] = None
    channels = read_channels()
    for key in ("usage", "budget", "settings"):
        out[key] = channels.get(key)
    return out


def _to_verify(update: StateUpdate, started: bool) -> Command[Literal["verify"]] | StateUpdate:
    """The task's update, sent on to verify when the step was one planmode started. A task sent from outside
    the run for a step planmode did not start records its refusal and ends there: it starts no second line of
    execution beside the run's own."""
    return Command(update=update, goto="verify") if started else update


def _step_id(task: Any) -> str:
    """The id of the step a ``Send`` names (its ``step_id``, or the id of the ``step`` it carries)."""
    if not isinstance(task, Mapping):
        return ""
    if isinstance(task.get("step_id"), str):
        return str(task["step_id"])
    step = task.get("step")
    if isinstance(step, Step):
        return step.id
    if isinstance(step, Mapping) and isinstance(step.get("id"), str):
        return str(step["id"])
    return ""


def _output_kept_in_store(outcome: StepOutcome, key: str, settings: PlanModeContext) -> StepOutcome:
    """The outcome of an attempt whose full output the store keeps under ``key``: the outcome (a pending write,
    then a checkpoint until verify clears it) keeps only its beginning; verify reads the rest with
    `stored_output`."""
    return outcome.model_copy(update={"output_ref": key, "output": outcome.output[: settings.result_chars]})


def _adapter_kept(cleared: Cleared, tools: Sequence[BaseTool]) -> frozenset[str]:
    """The files the small-model adapter, when the run's settings switch it on, also keeps from ``cleared.step``'s
    writes (read from the task's prose: the files it only reads, the files done steps named); none without it. A
    write to one is refused where the write happens, as a write to a done step's declared file is."""
    adapter = adapter_for(cleared.settings)
    if adapter is None:
        return frozenset()
    return adapter.kept_files(cleared.plan, cleared.step, workspace_root(tools))
