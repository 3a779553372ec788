"""verify: judge each executed step by its declared checks. Only a verified step becomes done; a failed
verification counts an attempt (the step is retried, or fails when its attempts are used up).

A step is checked by what its approved definition declares (`planmode.checks`): its checks run — a command in the
sandbox, a file looked at — and a failed check fails the attempt with the check's output, which the retry is
shown; no judge overrules it. A step that declares a write tool and made no write fails too. What the checks
cannot state, the step's ``acceptance`` prose, goes to the judge (the model's by default, or the graph's own
verifier), shown the tool calls that ran, the files written and the checks' results (`planmode.nodes._evidence`);
a step whose checks all pass and that has no prose is done without a judge call. verify runs no command that the
plan does not declare. With the small-model adapter on (``model_profile="small"``), the adapter judges what the
declared checks passed (`planmode.adapters`).

verify then makes dispatch's decision (`planmode.nodes._batch.next_batch`) on the plan it leaves, in the
same update: the next batch marked running, or the trouble, the finished run, the pause. Its router is
dispatch's, so a layer of steps takes two checkpointed super-steps (execute_step, verify), not three.

Two paths, one body: the judges run side by side (`planmode._drive.together`); ``invoke`` makes their calls in a
thread pool, ``ainvoke`` (the LangGraph server) awaits them together on the event loop, both bounded by
``max_parallel``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel

from planmode._compat import RunnableCallable
from planmode._drive import Call, together
from planmode.adapters import adapter_for
from planmode.checks import failure_reason
from planmode.context import PlanModeContext
from planmode.executors import StepContext, Verdict, verification
from planmode.nodes._batch import gates_may_stop, next_batch
from planmode.nodes._deps import Deps, NodeRuntime, StateUpdate, negotiated_of, settings_of, store_of
from planmode.nodes._evidence import declared_checks, gather, workspace_root
from planmode.nodes._outputs import astored_output, stored_output, summarize
from planmode.nodes._twin import Body, call, model_for, twin_node
from planmode.observability.events import emit
from planmode.observability.usage import step_scope
from planmode.state.approvals import covering_grant, record
from planmode.state.graph_state import PlanModeState, StepOutcome, run_writes_of
from planmode.state.models import Plan, PlanSource, Step, StepStatus, StepTransition
from planmode.state.patch import apply_transitions
from planmode.state.reducer import PlanUpdate

__all__ = ["bounded_gather", "make_verify"]

S = StepStatus
Work = list[tuple[Step, StepOutcome]]
_T = TypeVar("_T")
_R = TypeVar("_R")


def make_verify(deps: Deps) -> RunnableCallable:
    """Build the verify node: its body written once (`planmode.nodes._twin`); the judges run side by side
    (`planmode._drive.together`): ``invoke`` makes their calls in a thread pool, ``ainvoke`` awaits them together
    on the event loop, both bounded by ``max_parallel``."""

    def verify(state: PlanModeState, runtime: NodeRuntime) -> Body[StateUpdate]:
        settings = settings_of(state, runtime)
        plan, work = _work(state)
        if plan is None:
            return _idle(state, settings)
        if (unapproved := _unapproved(state, plan, work)) is not None:
            return unapproved
        adapter = adapter_for(settings)
        model = (yield from model_for(deps, settings, negotiated_of(state))) if _needs_model(deps, work) else None
        store = store_of(deps, runtime)
        texts = yield from call(partial(_outputs, work, store), partial(_aoutputs, work, store))
        full = {step.id: text for (step, _), text in zip(work, texts, strict=True)}
        root = workspace_root(deps.tools)

        def judge(step: Step, outcome: StepOutcome) -> Body[Verdict]:
            failed = _failed(outcome)
            if failed is not None:
                return failed
            run = partial(declared_checks, step, root, settings)
            results = yield from call(run, partial(asyncio.to_thread, run))
            evidence = gather(step, outcome, deps.tools, results)
            if evidence.failed:  # a failed declared check decides: no judge is asked
                return Verdict(passed=False, reason=evidence.no_write or failure_reason(results))
            if adapter is not None:
                judged: Verdict = yield from adapter.judge(
                    deps, plan, step, outcome, settings, model, full[step.id], results
                )
                return judged
            if deps.verifier is None and not step.acceptance.strip():
                return Verdict(passed=True, reason="")  # every check passed and no prose is left to judge
            report = "" if outcome.writes else full[step.id]
            ctx = _context(plan, step, settings, model, evidence.to_prompt(report))
            return (yield from verification(deps.verifier, step, full[step.id], ctx))

        def scoped(i: int, c: Call[Any]) -> Call[Any]:  # the judge's tokens count for its step
            return _scoped(work[i][0].id, c)

        judges = [judge(step, outcome) for step, outcome in work]
        verdicts = yield from together(judges, _width(work, settings), scoped)
        return _update(state, plan, work, verdicts, full, settings)

    return twin_node("verify", verify)


def _outputs(work: Work, store: Any) -> list[str]:
    """Each outcome's full output (the store holds what the outcome does not)."""
    return [stored_output(outcome, store) for _, outcome in work]


async def _aoutputs(work: Work, store: Any) -> list[str]:
    return list(await asyncio.gather(*(astored_output(outcome, store) for _, outcome in work)))


def _scoped(step_id: str, c: Call[_R]) -> Call[_R]:
    """``c`` with the model calls it makes counted for ``step_id`` (wherever it runs: a worker thread, a task)."""
    return Call(partial(_in_scope, step_id, c.run), partial(_ain_scope, step_id, c.arun))


def _in_scope(step_id: str, run: Callable[[], _R]) -> _R:
    with step_scope(step_id):
        return run()


async def _ain_scope(step_id: str, arun: Callable[[], Awaitable[_R]]) -> _R:
    with step_scope(step_id):
        return await arun()


async def bounded_gather(fn: Callable[[_T], Awaitable[_R]], items: Sequence[_T], limit: int) -> list[_R]:
    """``fn`` over ``items`` concurrently, at most ``limit`` at a time, results in order.

    The first exception (an interrupt, a lost model) cancels the calls still running, waits for them, and is
    raised as itself (not in an ``ExceptionGroup``: ``pausable`` and LangGraph look for the plain exception)."""
    gate = asyncio.Semaphore(max(1, limit))

    async def one(item: _T) -> _R:
        async with gate:
            return await fn(item)

    tasks = [asyncio.ensure_future(one(item)) for item in items]  # each copies the run's context
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


# -- the parts both paths share --------------------------------------------------------------------------


def _idle(state: PlanModeState, settings: PlanModeContext) -> StateUpdate:
    """Nothing to judge (a step was refused, could not reach the model, or was sent from outside the run):
    verify writes nothing, and its router sends the run where the state says — dispatch decides the next batch.
    (Deciding it here could collide with a dispatch that runs in the same super-step.) A step that lost the model
    pauses the run here, as dispatch's decision would (`next_batch`)."""
    del settings
    lost = state.get("unavailable")
    if isinstance(lost, dict):
        return {"status": "model_unavailable", "error": lost.get("error")}
    return {}


def _unapproved(state: PlanModeState, plan: Plan, work: Work) -> StateUpdate | None:
    """Outcomes of steps whose definition changed after they ran (an edit at a breakpoint before verify): such an
    outcome is not judged — "done" would claim work for a definition that never ran. The step goes back to
    pending and the approval is asked again (which shows the change); the other outcomes wait for it."""
    log = state.get("approvals")
    stale = [(s, o) for s, o in work if covering_grant(log, s, plan.goal) is None]
    if not stale:
        return None
    ids = ", ".join(s.id for s, _ in stale)
    back = [StepTransition(id=s.id, status=S.PENDING, attempts=max(0, s.attempts - 1)) for s, _ in stale]
    reason = f"the outcome of {ids} is for a definition that was edited after it ran; not judged"
    emit("step_refused", reason, step_id=stale[0][0].id)
    return {
        "plan": PlanUpdate(transitions=back, source=PlanSource.VERIFY),
        "step_outcomes": {s.id: None for s, _ in stale},
        "needs_approval": True,
        "status": "awaiting_approval",
        "approval_error": "the plan changed after it was approved; review it again",
        "approvals": [
            record(log, "refused", "refused", "execution guard", "planmode", plan, step=s.id, reason=reason)
            for s, _ in stale
        ],
    }


def _work(state: PlanModeState) -> tuple[Plan | None, Work]:
    """The plan and the (step, outcome) pairs to judge: outcomes of steps still running (None: nothing to do)."""
    plan = state.get("plan")
    outcomes = state.get("step_outcomes") or {}
    if plan is None or not outcomes:
        return None, []
    work: Work = []
    for sid, outcome in outcomes.items():
        step = plan.get(sid)
        if step is not None and step.status is S.RUNNING:
            work.append((step, outcome))
    return plan, work


def _needs_model(deps: Deps, work: Work) -> bool:
    """Only the default judge needs the model, and only for a successful attempt with prose to judge."""
    return deps.verifier is None and any(o.ok and s.acceptance.strip() for s, o in work)


def _width(work: Work, settings: PlanModeContext) -> int:
    return max(1, min(len(work), settings.max_parallel))


def _failed(outcome: StepOutcome) -> Verdict | None:
    """The verdict on an attempt that failed by itself (no judge is asked)."""
    if outcome.ok:
        return None
    return Verdict(passed=False, reason=outcome.error or "the attempt failed")


def _context(
    plan: Plan, step: Step, settings: PlanModeContext, model: BaseChatModel | None, evidence: str | None = None
) -> StepContext:
    return StepContext(
        goal=plan.goal,
        dependencies={},
        attempt=step.attempts,
        previous_error=step.error,
        settings=settings,
        tools=(),
        model=model,
        evidence=evidence,
    )


def _update(
    state: PlanModeState,
    plan: Plan,
    work: Work,
    verdicts: list[Verdict],
    full: dict[str, str],
    settings: PlanModeContext,
) -> StateUpdate:
    """The plan's transitions from the verdicts (with their events), and the outcomes cleared."""
    transitions: list[StepTransition] = []
    for (step, outcome), verdict in zip(work, verdicts, strict=True):
        # with the full output in the store, state keeps a short summary of it (read from the store when needed)
        kept = settings.stored_result_chars if outcome.output_ref else settings.result_chars
        if verdict.passed:
            summary = summarize(full[step.id], kept)
            transitions.append(
                StepTransition(
                    id=step.id, status=S.DONE, result=summary, error=None, output_ref=outcome.output_ref, clear=True
                )
            )
            emit(
                "step_completed",
                summary if kept == settings.result_chars else summarize(full[step.id], settings.result_chars),
                step_id=step.id,
                plan_version=plan.version,
                attempt=step.attempts,
                files=sorted(outcome.writes),  # what the attempt wrote (real paths): the CLI's live line names them
                **({"verdict": verdict.reason} if verdict.reason else {}),  # e.g. the checks overruling the judge
            )
            continue
        reason = verdict.reason or "verification failed"
        if outcome.blocked:  # retrying cannot help: reflect decides (patch, skip, or give up)
            transitions.append(StepTransition(id=step.id, status=S.BLOCKED, error=reason, clear=True))
            emit(
                "step_failed",
                reason,
                step_id=step.id,
                plan_version=plan.version,
                attempt=step.attempts,
                final=True,
                blocked=True,
            )
            continue
        # the same failure as the attempt before (its error, kept while the step ran): a retry cannot help, so the
        # step goes to reflection now instead of spending its remaining attempts blind
        exhausted = step.attempts >= settings.max_attempts or step.error == reason
        transitions.append(
            StepTransition(
                id=step.id,
                status=S.FAILED if exhausted else S.PENDING,
                error=reason,
                result=summarize(full[step.id], kept) if full[step.id] else None,
                clear=True,
            )
        )
        emit(
            "step_failed",
            reason,
            step_id=step.id,
            plan_version=plan.version,
            attempt=step.attempts,
            final=exhausted,
            files=sorted(outcome.writes),
        )
    outcomes: dict[str, Any] = state.get("step_outcomes") or {}
    cleared = dict.fromkeys(outcomes, None)
    # the files the attempts wrote, kept for the staleness check (the run's own writes are no outside change)
    written: StateUpdate = {"run_writes": run_writes_of(outcomes.values())}
    judged = apply_transitions(plan, transitions)
    if not judged.applied or gates_may_stop(state, settings):
        # refused transitions (cannot happen for running steps: the reducer records it), or a gate around
        # dispatch (per-step approval, staleness, the budget) may stop the next batch: dispatch decides
        return {
            "plan": PlanUpdate(transitions=transitions, source=PlanSource.VERIFY),
            "step_outcomes": cleared,
            **written,
        }
    # dispatch's decision on the plan as verify leaves it: the next batch starts without a dispatch
    # super-step (its steps wait in execute_step until this checkpoint is saved)
    decision = next_batch({**state, "step_outcomes": {}}, judged.plan, settings.max_parallel)
    started = decision.pop("plan", None)
    more = started.transitions if isinstance(started, PlanUpdate) else []
    return {
        **decision,
        "plan": PlanUpdate(transitions=[*transitions, *more], source=PlanSource.VERIFY),
        "step_outcomes": cleared,
        **written,
    }
